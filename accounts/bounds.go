package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
)

// Bounds on what an account holder can make the service store. Self-service requests
// are free and no rate-limit event, and most of them leave records (a key, an audit
// entry, an ended session): without bounds, one account could grow them without end.
//
//   - Keys: an account holds at most [Options.MaxOwnKeys] keys for self-service to
//     create another; its live keys and the keys revoked within
//     [Options.RevokedKeyRetention] count, judged and stored by the key store in one
//     atomic step. A revoked key older than the retention is deleted on a schedule
//     ([Options.KeyPruneInterval], [Manager.PruneKeys]).
//   - Listings: every listing of keys is a page ([auth.KeyQuery]): at most
//     [auth.MaxKeyPage] keys, [auth.DefaultKeyPage] unless the caller asks for fewer.
//   - Changes and sessions: each start of a session, each key that self-service
//     creates, rotates or changes, and each [Holder.Spend] (a webhook endpoint
//     created, changed or rotated, a test message, a delivery sent again) spends one
//     event of the account's self-service budget ([Options.SelfServiceLimit]), kept in the rate limiter so that it holds
//     across instances; beyond it, CodeRateLimited with RetryAfter. A request refused
//     before it would change anything (unauthenticated, forbidden, invalid) spends
//     nothing. Revocations and sign-outs spend nothing and are never refused: each
//     ends something a spent event made (a key is revoked once, a session ends once),
//     and a holder must always be able to revoke a key that leaked.

// selfServiceLimit returns the self-service budget that l sets: the default for the
// zero Limit, none (the zero Limit) for a negative Rate.
func selfServiceLimit(l driver.Limit) (driver.Limit, error) {
	switch {
	case l == driver.Limit{}:
		return DefaultSelfServiceLimit, nil
	case l.Rate < 0:
		return driver.Limit{}, nil
	case l.Rate == 0 || l.Per <= 0 || l.Burst <= 0:
		return driver.Limit{}, fmt.Errorf("accounts: Options.SelfServiceLimit %+v: give Rate, Per and Burst all positive (or a negative Rate for no bound)", l)
	}
	return l, nil
}

// selfServiceKey is the rate limiter's key of an account's self-service budget: the
// account id and a control character, which no account id contains, so that it is
// never the key of an account's own rate limit.
func selfServiceKey(account string) string { return account + "\x1fself-service" }

// spend takes one event from the self-service budget of account, or returns the
// CodeRateLimited refusal that says when to try again.
func (m *Manager) spend(ctx context.Context, account string) error {
	l := m.selfLimit
	if l.Rate <= 0 {
		return nil
	}
	d, err := m.rates.Allow(ctx, selfServiceKey(account), l, m.now())
	if err != nil {
		return m.unavailable(ctx, "rate limiter", err)
	}
	if d.Allowed {
		return nil
	}
	wait := max(d.RetryAfter.Round(time.Second), time.Second)
	e := newError(tollgate.CodeRateLimited, fmt.Sprintf(
		"this account has started as many sessions and made as many changes (of keys, of webhook endpoints) as it may for now (%d at once, then %s); try again in %s",
		l.Burst, rateText(l), wait), nil)
	e.RetryAfter = wait
	return e
}

// rateText says how fast l refills, as "30 an hour".
func rateText(l driver.Limit) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Second, "a second"}, {time.Minute, "a minute"}, {time.Hour, "an hour"}, {24 * time.Hour, "a day"}} {
		if l.Per == u.d {
			return fmt.Sprintf("%d %s", l.Rate, u.name)
		}
	}
	return fmt.Sprintf("%d every %s", l.Rate, l.Per)
}

// ownKeyLimit is the limit on the keys of an account for self-service to create one.
func (m *Manager) ownKeyLimit() auth.KeyLimit {
	if m.maxOwnKeys < 0 {
		return auth.KeyLimit{}
	}
	l := auth.KeyLimit{Max: m.maxOwnKeys}
	if m.keyRetention > 0 {
		l.RevokedSince = m.now().Add(-m.keyRetention)
	}
	return l
}

// PruneKeys deletes the keys revoked longer than [Options.RevokedKeyRetention] ago
// (never a primary key) and returns how many it deleted. The service calls it every
// [Options.KeyPruneInterval]; a host that turned that off may call it on its own
// schedule. It does nothing when revoked keys are kept for ever. Its error is the
// store's (store.ErrUnavailable while the key store is down). Any number of instances
// may prune the same key store at once.
func (m *Manager) PruneKeys(ctx context.Context) (int64, error) {
	if m.keyRetention <= 0 {
		return 0, nil
	}
	n, err := m.keys.PruneKeys(ctx, m.now().Add(-m.keyRetention))
	if err != nil {
		return n, fmt.Errorf("accounts: prune revoked keys: %w", err)
	}
	return n, nil
}

// KeyPage is a page of the keys of an account, oldest first.
type KeyPage struct {
	Keys []auth.Key
	// LastUsed holds, for each of Keys that was used, the last time it was (see
	// [OwnAccount.LastUsed]); nil when unknown.
	LastUsed map[string]time.Time
	// Next continues the listing (the After of the next query); empty at its end.
	Next string
}

// keyQueryError is the error of a key listing the store refused as out of bounds, or
// a store's error.
func (m *Manager) keyQueryError(ctx context.Context, q auth.KeyQuery, err error) error {
	if errors.Is(err, auth.ErrBadKeyQuery) {
		if q.Limit < 0 || q.Limit > auth.MaxKeyPage {
			return newError(tollgate.CodeInvalidInput, fmt.Sprintf("limit: a page holds 1 to %d keys", auth.MaxKeyPage), err)
		}
		return newError(tollgate.CodeInvalidInput, "cursor: it names no key of the account (its key may have been deleted since); list from the first page", err)
	}
	return m.manageError(ctx, "account", q.Account, err)
}

// checkKeyQuery refuses a query of keys out of bounds before any store is asked.
func checkKeyQuery(q auth.KeyQuery) error {
	if q.Limit < 0 || q.Limit > auth.MaxKeyPage {
		return newError(tollgate.CodeInvalidInput, fmt.Sprintf("limit: a page holds 1 to %d keys", auth.MaxKeyPage), nil)
	}
	return checkText("cursor", q.After, maxIDLength)
}

// AccountKeys returns a page of the keys of account q.Account (never their values),
// oldest first, for an operator. A limit out of bounds or a cursor that names no key
// of the account is CodeInvalidInput; an unknown account CodeNotFound.
func (m *Manager) AccountKeys(ctx context.Context, q auth.KeyQuery) (KeyPage, error) {
	if err := checkText("account_id", q.Account, maxIDLength); err != nil {
		return KeyPage{}, err
	}
	if err := checkKeyQuery(q); err != nil {
		return KeyPage{}, err
	}
	page, err := m.keys.Keys(ctx, q)
	if err != nil {
		return KeyPage{}, m.keyQueryError(ctx, q, err)
	}
	return KeyPage{Keys: page.Keys, Next: page.Next}, nil
}

// DefaultMaxOwnKeys is the default [Options.MaxOwnKeys].
const DefaultMaxOwnKeys = 100

// DefaultRevokedKeyRetention is the default [Options.RevokedKeyRetention].
const DefaultRevokedKeyRetention = 7 * 24 * time.Hour

// DefaultKeyPruneInterval is the longest default [Options.KeyPruneInterval].
const DefaultKeyPruneInterval = time.Hour

// DefaultSelfServiceLimit is the default [Options.SelfServiceLimit]: 100 at once, then
// 30 an hour.
var DefaultSelfServiceLimit = driver.Limit{Rate: 30, Per: time.Hour, Burst: 100}
