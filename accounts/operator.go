package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
)

// Operators' management: accounts, keys and credits, for the admin API and for
// hosts that seed accounts at start-up. Key values are returned only by the calls that
// create them.

// Spec describes an account to create with [Manager.CreateAccount].
type Spec struct {
	// ID is the account's id; if empty, one is generated.
	ID string
	// Plan names one of the service's plans.
	Plan string
	// Credits, if set, is the starting balance; by default it is the plan's allowance.
	Credits *int64
	// Restrictions apply to every key of the account.
	Restrictions auth.Restrictions
	// KeyValue, if set, is the primary key's value (for fixtures); else it is random.
	KeyValue string
	// BillingAnchor, if set, is the instant the account's credit periods are counted
	// from (see [billing.PeriodAt]): the first of a month, say, to renew on the first
	// of every month. It is kept to the second, and must be from 1970 to a year after
	// the creation. By default it is the creation time, so that the account's first
	// period begins when it is created.
	BillingAnchor *time.Time
}

// CreateAccount creates an account, its primary key and its balance, and returns the
// account, the key and the key's value. It is idempotent, for a host that seeds its
// accounts at every start: an account that exists with the same plan, restrictions
// and (when spec gives it) primary key value is returned as it is, with the value spec
// gave (none when it gave none), and no change is published; with another definition
// it is a conflict that says what differs. The opening credits are not compared, nor
// the billing anchor unless spec gives one.
//
// The opening balance is the account's first period's: its allowance renews at the
// end of each of its periods, counted from its billing anchor.
func (m *Manager) CreateAccount(ctx context.Context, spec Spec) (auth.Account, auth.Key, string, error) {
	plan, ok := m.plans.Lookup(spec.Plan)
	if !ok {
		return auth.Account{}, auth.Key{}, "", newError(tollgate.CodeInvalidInput,
			fmt.Sprintf("plan %q does not exist; the plans are %v", spec.Plan, m.plans.Names()), nil)
	}
	credits := plan.Credits
	if spec.Credits != nil {
		switch {
		case *spec.Credits < 0:
			return auth.Account{}, auth.Key{}, "", newError(tollgate.CodeInvalidInput, "credits cannot be negative", nil)
		case *spec.Credits > billing.MaxCredits:
			return auth.Account{}, auth.Key{}, "", newError(tollgate.CodeInvalidInput,
				fmt.Sprintf("credits cannot pass the maximum of %d", int64(billing.MaxCredits)), nil)
		}
		credits = *spec.Credits
	}
	if spec.ID != "" {
		if err := checkText("id", spec.ID, maxIDLength); err != nil {
			return auth.Account{}, auth.Key{}, "", err
		}
		if err := m.checkIDUnused(ctx, spec.ID); err != nil {
			return auth.Account{}, auth.Key{}, "", err
		}
	}
	now := m.now()
	anchor, err := billingAnchor(spec.BillingAnchor, now)
	if err != nil {
		return auth.Account{}, auth.Key{}, "", err
	}
	var c *change
	acct, key, value, err := m.storeAccount(ctx, spec, anchor, now, func(acct auth.Account, key auth.Key) context.Context {
		c = m.newChange(ctx, now, event.Change{Type: event.AccountCreated, Account: acct.ID, Key: key.ID, Plan: acct.Plan,
			After: restrictionsJSON(acct.Restrictions), Credits: credits})
		return m.journaled(ctx, c)
	})
	if errors.Is(err, store.ErrConflict) && spec.ID != "" {
		return m.existingAccount(ctx, spec, credits, now)
	}
	if err != nil {
		return auth.Account{}, auth.Key{}, "", m.manageError(ctx, "account", spec.ID, err)
	}
	// The account and its key exist from here on, whatever becomes of the balance.
	m.publish(ctx, c)
	if err := m.openBalance(ctx, &acct, credits, now); err != nil {
		return auth.Account{}, auth.Key{}, "", err
	}
	return acct, key, value, nil
}

// openBalance opens an account's balance with credits in its period at now, unless it
// has one.
func (m *Manager) openBalance(ctx context.Context, acct *auth.Account, credits int64, now time.Time) error {
	accountID := acct.ID
	plan, period := m.planAt(acct, now)
	err := m.ledger.Open(ctx, driver.Opening{
		Account: accountID, Balance: credits, Allowance: plan.Credits, Period: period,
	})
	switch {
	case errors.Is(err, billing.ErrTooManyCredits):
		return newError(tollgate.CodeInvalidInput, fmt.Sprintf(
			"the plan %q allows %d credits a period, more than the maximum of %d", plan.Name, plan.Credits, int64(billing.MaxCredits)), err)
	case err != nil && !errors.Is(err, store.ErrConflict):
		return m.manageError(ctx, "balance of account", accountID, err)
	}
	return nil
}

// Info is what [Manager.Account] tells an operator of an account, and
// [Manager.OwnAccount] its holder: the account, its plan and balance, and the first
// page of the keys the reader may see (never their values).
type Info struct {
	// Account is the account's record as it reads now: a change of plan that waited
	// for a renewal that has passed is applied (its Plan is the plan in force, and
	// nothing is pending), as the service applies it.
	Account auth.Account
	// Plan is the plan in force; Balance the balance in the account's current period.
	Plan    billing.Plan
	Balance billing.Balance
	// Keys are the first page ([auth.DefaultKeyPage] keys), oldest first, of the
	// account's keys: every key for an operator, the primary key (or a session acting
	// as it); for a sub-key, itself and the keys it may manage. KeysNext continues the
	// listing ([Manager.AccountKeys], [Manager.OwnKeys]); it is empty when Keys are
	// all of them.
	Keys     []auth.Key
	KeysNext string
	// LastUsed holds, for a holder, when each of Keys that was used was last used (see
	// [Manager.KeysLastUsed]). It is nil for an operator (who reads it with
	// KeysLastUsed), when the service records no usage, and when the usage store cannot
	// answer: then the keys are answered without it, and the failure is logged at WARN.
	LastUsed map[string]time.Time
	// Caller, for a holder, is the key the holder authenticated with, or that its
	// session acts as (the zero Key for a session token that names no key). It is the
	// zero Key for an operator.
	Caller auth.Key
}

// Account returns an account with its plan, its balance and the first page of its keys.
func (m *Manager) Account(ctx context.Context, id string) (Info, error) {
	if err := checkText("account_id", id, maxIDLength); err != nil {
		return Info{}, err
	}
	acct, err := m.keys.Account(ctx, id)
	if err != nil {
		return Info{}, m.manageError(ctx, "account", id, err)
	}
	keys, err := m.keys.Keys(ctx, auth.KeyQuery{Account: id})
	if err != nil {
		return Info{}, m.manageError(ctx, "account", id, err)
	}
	now := m.now()
	plan, b, err := m.balanceAt(ctx, &acct, now)
	if err != nil {
		return Info{}, m.manageError(ctx, "balance of account", id, err)
	}
	return Info{Account: m.current(acct, now), Plan: plan, Balance: b, Keys: keys.Keys, KeysNext: keys.Next}, nil
}

// CreateKey creates a sub-key of an account and returns it with its value. Its
// restrictions must be within the account's. It is not held to [Options.MaxOwnKeys].
// Given a value (NewKey.Value), it is idempotent: a key of the account with that value,
// the same name and the same restrictions is returned as it is (revoked, if it was
// revoked since), and no change is published; any other key with the value is a
// conflict.
func (m *Manager) CreateKey(ctx context.Context, accountID string, spec NewKey) (auth.Key, string, error) {
	return m.createKey(ctx, accountID, spec, auth.KeyLimit{})
}

// createKey is CreateKey under a limit on the account's keys; a key it refuses is an
// error wrapping [auth.ErrTooManyKeys].
func (m *Manager) createKey(ctx context.Context, accountID string, spec NewKey, limit auth.KeyLimit) (auth.Key, string, error) {
	if err := checkText("account_id", accountID, maxIDLength); err != nil {
		return auth.Key{}, "", err
	}
	if err := checkText("name", spec.Name, maxNameLength); err != nil {
		return auth.Key{}, "", err
	}
	now := m.now()
	if spec.Value != "" && spec.Restrictions.Expired(now) {
		// A seeded key that has expired since it was created is answered as it is;
		// a new one is refused for its expiry below.
		if key, value, err := m.existingKey(ctx, accountID, spec); err == nil {
			return key, value, nil
		}
	}
	var c *change
	key, value, err := m.storeKey(ctx, accountID, spec, limit, now, func(key auth.Key) context.Context {
		c = m.newChange(ctx, now, event.Change{Type: event.KeyCreated, Account: key.AccountID, Key: key.ID, Name: key.Name,
			After: restrictionsJSON(key.Restrictions)})
		return m.journaled(ctx, c)
	}, func(key auth.Key) error {
		// The key was stored, then found in an account that a closure reached
		// meanwhile: it is revoked, and both are published, as they happened (the
		// creation is in the journal already).
		m.publish(ctx, c)
		r := m.newChange(ctx, now, event.Change{Type: event.KeyRevoked, Account: key.AccountID, Key: key.ID})
		_, err := m.keys.RevokeKey(m.journaled(ctx, r), key.ID, auth.AnyRevision, now)
		switch {
		case errors.Is(err, store.ErrNotFound): // deleted with its account
			return nil
		case err != nil:
			return err
		}
		m.publish(ctx, r)
		return nil
	})
	if errors.Is(err, store.ErrConflict) && spec.Value != "" {
		return m.existingKey(ctx, accountID, spec)
	}
	if errors.Is(err, auth.ErrTooManyKeys) {
		return auth.Key{}, "", err
	}
	if err != nil {
		return auth.Key{}, "", m.manageError(ctx, "account", accountID, err)
	}
	m.publish(ctx, c)
	return key, value, nil
}

// RotateKey gives a key a new value, returned once; the old value stops working at once.
func (m *Manager) RotateKey(ctx context.Context, keyID string) (auth.Key, string, error) {
	return m.rotateKey(ctx, keyID, auth.AnyRevision, "")
}

// rotateKey is RotateKey of a key that still has revision rev (the one a decision to
// rotate it was made on), unless rev is [auth.AnyRevision]: a key that changed since is
// CodeConflict, and is left as it is. account is the key's account, "" if the caller
// has not read the key.
func (m *Manager) rotateKey(ctx context.Context, keyID string, rev int64, account string) (auth.Key, string, error) {
	if err := checkText("key_id", keyID, maxIDLength); err != nil {
		return auth.Key{}, "", err
	}
	// The change names the key's account (a key never changes accounts): read first,
	// unless the caller did, when a journal records the change before the rotation
	// returns the key.
	c := m.newChange(ctx, m.now(), event.Change{Type: event.KeyRotated, Account: account, Key: keyID})
	wctx := ctx
	if m.keyJournal != nil && m.events.Wants(c.Type) {
		if c.Account == "" {
			k, err := m.keys.Key(ctx, keyID)
			if err != nil {
				return auth.Key{}, "", m.changeError(ctx, keyID, err)
			}
			c.Account = k.AccountID
		}
		wctx = m.journaled(ctx, c)
	}
	now := c.At
	key, value, err := m.storeRotation(wctx, keyID, rev, now)
	if errors.Is(err, store.ErrConflict) && !errors.Is(err, errChangeConflict) {
		// The key is revoked (a taken hash, the other conflict, is one in 2^122).
		if k, kerr := m.keys.Key(ctx, keyID); kerr == nil && k.Revoked() {
			return auth.Key{}, "", newError(tollgate.CodeConflict,
				fmt.Sprintf("key %q is revoked; a revoked key cannot be rotated: create a new key", keyID), err)
		}
	}
	if err != nil {
		return auth.Key{}, "", m.changeError(ctx, keyID, err)
	}
	c.Account = key.AccountID
	m.publish(ctx, c)
	return key, value, nil
}

// RevokeKey revokes a key; the very next call with it is refused. Revoking a revoked
// key changes nothing: it returns the key as it is, and adds no audit entry. (Two
// revocations of a live key at the same moment may both be recorded: the key is read
// before it is revoked, and the stores do not say which revocation was first.)
func (m *Manager) RevokeKey(ctx context.Context, keyID string) (auth.Key, error) {
	return m.revokeKey(ctx, keyID, auth.AnyRevision)
}

// revokeKey is RevokeKey of a key that still has revision rev, unless rev is
// [auth.AnyRevision]: a key that changed since (revoked or not) is CodeConflict, and is
// left as it is.
func (m *Manager) revokeKey(ctx context.Context, keyID string, rev int64) (auth.Key, error) {
	if err := checkText("key_id", keyID, maxIDLength); err != nil {
		return auth.Key{}, err
	}
	k, err := m.keys.Key(ctx, keyID)
	if err == nil && k.Revoked() && (rev == auth.AnyRevision || k.Revision == rev) {
		return k, nil // a store error, or a changed key, is the revocation's to report
	}
	now := m.now()
	c := m.newChange(ctx, now, event.Change{Type: event.KeyRevoked, Account: k.AccountID, Key: keyID})
	wctx := ctx
	if err == nil {
		wctx = m.journaled(ctx, c) // the change names the key's account, which the key read says
	}
	key, err := m.storeRevocation(wctx, keyID, rev, now)
	if err != nil {
		return auth.Key{}, m.changeError(ctx, keyID, err)
	}
	c.Account = key.AccountID
	m.publish(ctx, c)
	return key, nil
}

// UpdateKey changes the name or the restrictions of a key (within its account's) and
// returns the key as changed. The very next call with the key is held to the new
// restrictions, on every instance, key cache or not. A revoked key is CodeConflict.
func (m *Manager) UpdateKey(ctx context.Context, keyID string, c KeyChange) (auth.Key, error) {
	return m.updateKey(ctx, keyID, c, nil)
}

// updateKey is UpdateKey with a policy check (see storeUpdate).
func (m *Manager) updateKey(ctx context.Context, keyID string, c KeyChange, check func(old, updated auth.Key) error) (auth.Key, error) {
	if err := checkText("key_id", keyID, maxIDLength); err != nil {
		return auth.Key{}, err
	}
	if c.Name != nil {
		if err := checkText("name", *c.Name, maxNameLength); err != nil {
			return auth.Key{}, err
		}
	}
	now := m.now()
	var ch *change
	_, after, err := m.storeUpdate(ctx, keyID, c, now, check, func(old, updated auth.Key) context.Context {
		ch = m.newChange(ctx, now, event.Change{Type: event.KeyUpdated, Account: old.AccountID, Key: old.ID,
			Before: restrictionsJSON(old.Restrictions), After: restrictionsJSON(updated.Restrictions),
			OldName: old.Name, Name: updated.Name})
		return m.journaled(ctx, ch)
	})
	if e := (*tollgate.Error)(nil); errors.As(err, &e) {
		return auth.Key{}, e
	}
	switch {
	case errors.Is(err, errUpdateConflict):
		return auth.Key{}, newError(tollgate.CodeConflict, "the key changed while it was being updated; read it again and retry", err)
	case errors.Is(err, store.ErrConflict):
		// The key is revoked (by the time the update was tried, if not when read).
		return auth.Key{}, newError(tollgate.CodeConflict, fmt.Sprintf("key %q is revoked; a revoked key cannot be changed", keyID), err)
	case err != nil:
		return auth.Key{}, m.manageError(ctx, "key", keyID, err)
	}
	m.publish(ctx, ch)
	return after, nil
}

// CreditOptions are the optional parts of a credit adjustment ([Manager.AdjustCredits]).
type CreditOptions struct {
	// IdempotencyKey, when not empty, makes a retried adjustment apply once, and be
	// recorded once in the audit log (its events have one ID), for as long as the
	// ledger remembers the key (see the ledger's documentation). The same key with
	// another amount or expiry is taken for the retry it claims to be: it changes
	// nothing and answers the current balance.
	IdempotencyKey string
	// ExpiresAt, for a grant (a positive amount), is when what is left of it lapses;
	// zero for a grant that never lapses. It must be in the future, at most
	// [MaxGrantLife] ahead. It is refused with a negative amount.
	ExpiresAt time.Time
}

// MaxGrantLife is how far ahead a grant's expiry may be: ten years.
const MaxGrantLife = 10 * 366 * 24 * time.Hour

// AdjustCredits grants amount credits to an account (a negative amount takes them
// away, never below zero; a grant never takes the remaining plus used credits past
// [billing.MaxCredits]). A grant is credits bought or given: they carry over from
// period to period, as the plan's allowance renews, until they are spent or until
// opts.ExpiresAt; calls spend the allowance first, then the grants that lapse first. A
// negative amount takes the allowance first, then the grants. The reason is required.
// opts may be nil.
func (m *Manager) AdjustCredits(ctx context.Context, accountID string, amount int64, reason string, opts *CreditOptions) (billing.Balance, error) {
	var o CreditOptions
	if opts != nil {
		o = *opts
	}
	idempotencyKey := o.IdempotencyKey
	if err := checkText("account_id", accountID, maxIDLength); err != nil {
		return billing.Balance{}, err
	}
	if err := checkText("reason", reason, maxReasonLength); err != nil {
		return billing.Balance{}, err
	}
	if strings.TrimSpace(reason) == "" {
		return billing.Balance{}, newError(tollgate.CodeInvalidInput, "reason is required: say why the balance changes", nil)
	}
	if amount < -billing.MaxCredits || amount > billing.MaxCredits {
		return billing.Balance{}, newError(tollgate.CodeInvalidInput, fmt.Sprintf(
			"amount must be between -%d and %d", int64(billing.MaxCredits), int64(billing.MaxCredits)), nil)
	}
	now := m.now()
	if !o.ExpiresAt.IsZero() {
		switch {
		case amount <= 0:
			return billing.Balance{}, newError(tollgate.CodeInvalidInput, "expires_at applies to a grant: the amount must be positive", nil)
		case !o.ExpiresAt.After(now):
			return billing.Balance{}, newError(tollgate.CodeInvalidInput, "expires_at must be in the future", nil)
		case o.ExpiresAt.Sub(now) > MaxGrantLife:
			return billing.Balance{}, newError(tollgate.CodeInvalidInput, "expires_at must be at most ten years ahead", nil)
		}
	}
	acct, err := m.keys.Account(ctx, accountID)
	if err != nil {
		return billing.Balance{}, m.manageError(ctx, "account", accountID, err)
	}
	plan, period := m.planAt(&acct, now)
	// The adjustment's id: random, or, with an idempotency key, the same for every
	// retry, so that the ledger applies it once.
	var id billing.RequestID
	if idempotencyKey != "" {
		sum := sha256.Sum256([]byte("adjust\x00" + accountID + "\x00" + idempotencyKey))
		copy(id[:], sum[:])
	} else {
		rand.Read(id[:])
	}
	adj := driver.Adjustment{Account: accountID, Request: id, Amount: amount, Part: driver.PartGrants,
		Expires: o.ExpiresAt, Reason: reason, Period: period, Allowance: plan.Credits, Now: now}
	c := event.Change{Type: event.CreditsAdjusted, Account: accountID, Credits: amount, Reason: reason, Expires: o.ExpiresAt}
	if idempotencyKey != "" {
		// A replay changes nothing: its event has the first one's ID, which the audit
		// log stores once, and so does the journal.
		c.ID = "credits-" + hex.EncodeToString(id[:])
	}
	ch := m.newChange(ctx, now, c)
	b, err := m.ledger.Adjust(m.journaled(ctx, ch), adj)
	if errors.Is(err, store.ErrNotFound) {
		// The account has no balance (its creation was interrupted): open it as its
		// creation would have, with the period's allowance, then adjust it.
		if err = m.openBalance(ctx, &acct, plan.Credits, now); err != nil {
			return billing.Balance{}, err
		}
		b, err = m.ledger.Adjust(m.journaled(ctx, ch), adj)
	}
	b.Allowance = plan.Credits
	if errors.Is(err, billing.ErrInsufficientCredits) {
		return b, newError(tollgate.CodeConflict, fmt.Sprintf("the balance is %d; it cannot go below zero", b.Remaining), err)
	}
	if errors.Is(err, billing.ErrTooManyGrants) {
		return b, newError(tollgate.CodeConflict, fmt.Sprintf(
			"the account holds grants that lapse at %d different times, the most it may: grant credits that lapse when one of them does, or never", driver.MaxGrantLots), err)
	}
	if errors.Is(err, billing.ErrTooManyCredits) {
		return b, newError(tollgate.CodeInvalidInput, fmt.Sprintf(
			"the balance is %d with %d used this period; together they cannot pass the maximum of %d credits",
			b.Remaining, b.Used, int64(billing.MaxCredits)), err)
	}
	if err != nil {
		return b, m.manageError(ctx, "balance of account", accountID, err)
	}
	m.publish(ctx, ch)
	return b, nil
}

// manageError maps the errors of account and key management to codes.
func (m *Manager) manageError(ctx context.Context, what, id string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return newError(tollgate.CodeNotFound, fmt.Sprintf("no %s has the id %q", what, id), err)
	case errors.Is(err, store.ErrConflict):
		// The store's words name the store: they stay in Err, for the logs.
		return newError(tollgate.CodeConflict, fmt.Sprintf("the %s %q conflicts with an existing record: read it again, or choose another id", what, id), err)
	case errors.Is(err, errInvalid), errors.Is(err, auth.ErrInvalid), errors.Is(err, auth.ErrWidens):
		return newError(tollgate.CodeInvalidInput, err.Error(), err)
	}
	return m.unavailable(ctx, what, err)
}

// changeError is manageError for a rotation or revocation of a key, which may have been
// conditioned on the key's revision.
func (m *Manager) changeError(ctx context.Context, keyID string, err error) error {
	if errors.Is(err, errChangeConflict) {
		return newError(tollgate.CodeConflict, "the key changed while you were changing it; read it again and retry", err)
	}
	return m.manageError(ctx, "key", keyID, err)
}
