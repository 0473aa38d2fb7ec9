package accounts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/usage"
)

// Self-service: account holders reading their account and managing their own keys with
// their own credentials (package selfservice serves these methods over HTTP). The rules
// live here, so they hold whichever front door asks:
//
//   - The caller is authenticated by its API key or session token, and checked against
//     the key store even when its record comes from the key cache: a rotated, revoked,
//     expired or narrowed key is refused at once. The key's (and the account's) IP
//     allow-list and expiry apply; its channel and API lists do not, since self-service
//     is neither a call to an API nor one of the call channels. Self-service requests are
//     not API calls: they are not billed and are no rate-limit event.
//   - The account's primary key manages every key of the account. A session acts as
//     the key that started it (a login session as the primary key), with that key's
//     rights, and a session token that names no key acts for the whole account. A
//     sub-key manages keys only if [Options.SubKeysManageKeys] is set, and then only keys
//     no wider than itself, never the primary key; without it, a sub-key may read the
//     account and its own record, nothing more.
//   - A new key is within the caller's own key and the account; an update may only
//     narrow a key (or rename it). The primary key can be rotated, not revoked nor
//     changed: its revocation would lock the account holder out; that is the operator's
//     to do.
//   - A key of another account is answered as a key that does not exist.
//   - Usage statistics: the caller reads its own account's only. The primary key (a
//     session acting as it, or one that names no key) reads the whole account; any
//     other key, or a session it started, reads only its own key's calls.
//   - An account holds at most [Options.MaxOwnKeys] keys (live, or revoked within
//     [Options.RevokedKeyRetention]) for self-service to create another; listings are
//     paged; creating, rotating and changing a key spend the account's self-service
//     budget ([Options.SelfServiceLimit]). See the bounds in bounds.go.
//   - A suspended account's holder may sign in, read the account, its keys, usage and
//     audit log, and revoke keys, but keys are not created, rotated nor changed
//     (CodeAccountSuspended) until the operator reactivates the account. A closed
//     account's keys are revoked: its holder is refused as a revoked key is.
//   - Every change goes through the management methods, so it is in the audit log with
//     the caller's key id ([audit.SessionActor] for a session without a key) as its
//     actor and the caller's address. Only the caller that sees every key (the primary
//     key, a session acting as it, or one that names no key) reads the audit log, which
//     tells of every key; a sub-key does not, whatever the options.
//
// Refusals are [*tollgate.Error] values that say why: CodeForbidden for what the
// caller may not do, CodeNotFound, CodeInvalidInput naming the field, CodeConflict for
// a revoked key, a key that changed between its reading and its change (read it again
// and retry: a rotation, revocation or update applies only to the record it was judged
// on), or an account at its cap of keys; CodeRateLimited, with RetryAfter, for an
// account that spent its self-service budget.

// self authenticates a self-service caller (see above) and names it as the actor of the
// changes made with the returned context.
func (m *Manager) self(ctx context.Context, c tollgate.Caller) (context.Context, tollgate.Principal, error) {
	c.Channel = 0 // channel restrictions do not apply to self-service
	c.Verify = true
	p, err := m.svc.Authenticate(ctx, c)
	if err != nil {
		return ctx, tollgate.Principal{}, err
	}
	reqlog.From(ctx).Identify(p.Account.ID, p.Key.ID)
	actor := p.Key.ID
	switch {
	case actor != "":
	case p.SessionID != "":
		actor = audit.SessionActor(p.SessionID)
	default:
		actor = audit.Session // a token issued before sessions had ids
	}
	return WithActor(ctx, event.Actor{ID: actor, Addr: c.Addr}), p, nil
}

// mayManage returns nil if the principal may manage key k of its account, or the
// refusal that says why.
func (m *Manager) mayManage(p *tollgate.Principal, k auth.Key) error {
	if p.WholeAccount() {
		return nil
	}
	if !m.subKeysManage {
		return newError(tollgate.CodeForbidden, "a sub-key cannot manage keys on this service: use the account's primary key, or a session started with it", nil)
	}
	if k.Primary {
		return newError(tollgate.CodeForbidden, "a sub-key cannot manage the account's primary key", nil)
	}
	if err := k.Restrictions.WithinOf(p.Key.Restrictions, "your key"); err != nil {
		return newError(tollgate.CodeForbidden, fmt.Sprintf("key %q is wider than the key you use, so you cannot manage it: %v", k.ID, unwrapWidens(err)), err)
	}
	return nil
}

// unwrapWidens returns the message of a widening without the sentinel's prefix.
func unwrapWidens(err error) string {
	msg := err.Error()
	prefix := auth.ErrWidens.Error() + ": "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return msg
}

// ownKey returns the key with the given id if it belongs to the principal's account;
// a key of another account is CodeNotFound, as one that does not exist.
func (m *Manager) ownKey(ctx context.Context, p *tollgate.Principal, keyID string) (auth.Key, error) {
	if err := checkText("key_id", keyID, maxIDLength); err != nil {
		return auth.Key{}, err
	}
	k, err := m.keys.Key(ctx, keyID)
	switch {
	case err == nil && k.AccountID == p.Account.ID:
		return k, nil
	case err == nil || errors.Is(err, store.ErrNotFound):
		return auth.Key{}, newError(tollgate.CodeNotFound, fmt.Sprintf("your account has no key with the id %q", keyID), err)
	}
	return auth.Key{}, m.manageError(ctx, "key", keyID, err)
}

// managed authenticates a self-service caller and returns the key of its account with
// the given id if the caller may manage it.
func (m *Manager) managed(ctx context.Context, c tollgate.Caller, keyID string) (context.Context, tollgate.Principal, auth.Key, error) {
	ctx, p, err := m.self(ctx, c)
	if err != nil {
		return ctx, tollgate.Principal{}, auth.Key{}, err
	}
	k, err := m.ownKey(ctx, &p, keyID)
	if err == nil {
		err = m.mayManage(&p, k)
	}
	return ctx, p, k, err
}

// A Holder is the caller of a self-service request that acts for its whole account, as
// [Manager.AccountHolder] authenticated it.
type Holder struct {
	// Account is the caller's account.
	Account auth.Account
	// Actor names the caller, as the changes it makes name it in the audit log: the
	// id of its key ([audit.SessionActor] for a session that names none) and the
	// client's address.
	Actor event.Actor

	m *Manager
}

// AccountHolder authenticates a self-service caller as the other self-service methods
// do (free, no rate-limit event), for what the account's holder manages for the whole
// account outside this package (the account's webhook endpoints, which package
// selfservice serves with package webhook): only the account's primary key, a session
// acting as it, or a session that names no key may. Any other key, or a session it
// started, is CodeForbidden, with a message that says to use the primary key; what
// names what is managed in it ("webhook endpoints"). The changes made for the holder
// name [Holder.Actor] as their actor. A suspended account's holder is not refused:
// what it manages this way is not a call.
func (m *Manager) AccountHolder(ctx context.Context, c tollgate.Caller, what string) (Holder, error) {
	ctx, p, err := m.self(ctx, c)
	if err != nil {
		return Holder{}, err
	}
	if !p.WholeAccount() {
		return Holder{}, newError(tollgate.CodeForbidden, fmt.Sprintf(
			"a sub-key cannot manage the account's %s: use the account's primary key, or a session started with it", what), nil)
	}
	return Holder{Account: p.Account, Actor: actorOf(ctx), m: m}, nil
}

// Spend spends one event of the holder's account's self-service budget
// ([Options.SelfServiceLimit]), as a change of a key does, and is CodeRateLimited with
// RetryAfter beyond it. Call it before a request that makes the service store or send
// something (a creation, a change, a message), once the request is judged valid, and
// not before a read nor a deletion. A Holder that AccountHolder did not return spends
// nothing.
func (h Holder) Spend(ctx context.Context) error {
	if h.m == nil {
		return nil
	}
	return h.m.spend(ctx, h.Account.ID)
}

// OwnAccount returns the caller's account, plan, balance and the first page of the keys
// it may see (never their values). It is free and no rate-limit event.
func (m *Manager) OwnAccount(ctx context.Context, c tollgate.Caller) (Info, error) {
	_, p, err := m.self(ctx, c)
	if err != nil {
		return Info{}, err
	}
	page, err := m.visibleKeys(ctx, &p, auth.KeyQuery{})
	if err != nil {
		return Info{}, err
	}
	b, err := m.balance(ctx, &p)
	if err != nil {
		return Info{}, err
	}
	return Info{Account: m.current(p.Account, m.now()), Plan: p.Plan, Balance: b, Keys: page.Keys, KeysNext: page.Next,
		LastUsed: m.lastUsed(ctx, p.Account.ID, page.Keys), Caller: p.Key}, nil
}

// OwnKeys returns a page of the keys the caller may see (see [Info].Keys), oldest
// first, never their values, and when each of them was last used (see
// [Info].LastUsed). q.Account is set to the caller's account; q.Limit is at
// most [auth.MaxKeyPage] ([auth.DefaultKeyPage] for 0), and q.After the Next of the
// page before. A limit out of bounds, or a cursor that names no key of the account
// (one deleted since, say), is CodeInvalidInput naming the parameter.
func (m *Manager) OwnKeys(ctx context.Context, c tollgate.Caller, q auth.KeyQuery) (KeyPage, error) {
	if err := checkKeyQuery(q); err != nil {
		return KeyPage{}, err
	}
	_, p, err := m.self(ctx, c)
	if err != nil {
		return KeyPage{}, err
	}
	page, err := m.visibleKeys(ctx, &p, q)
	if err != nil {
		return KeyPage{}, err
	}
	return KeyPage{Keys: page.Keys, Next: page.Next, LastUsed: m.lastUsed(ctx, p.Account.ID, page.Keys)}, nil
}

// OwnKey returns the key of the caller's account with the given id, if the caller may
// see it (see [Info].Keys), never its value; any other key is CodeNotFound.
func (m *Manager) OwnKey(ctx context.Context, c tollgate.Caller, keyID string) (auth.Key, error) {
	_, p, err := m.self(ctx, c)
	if err != nil {
		return auth.Key{}, err
	}
	k, err := m.ownKey(ctx, &p, keyID)
	if err != nil {
		return auth.Key{}, err
	}
	if !m.visible(&p, k) {
		return auth.Key{}, newError(tollgate.CodeNotFound, fmt.Sprintf("your account has no key with the id %q that you may see", keyID), nil)
	}
	return k, nil
}

// lastUsed returns when each of keys (of account) was last used, or nil when the
// service records no usage or the usage store cannot say: a listing of keys does not
// fail for want of statistics. The map holds only keys, not every key of the account:
// the caller may not know the others.
func (m *Manager) lastUsed(ctx context.Context, account string, keys []auth.Key) map[string]time.Time {
	if m.usageDB == nil {
		return nil
	}
	all, err := m.usageDB.LastUsed(ctx, account)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		m.log.WarnContext(ctx, "tollgate: the usage store cannot say when keys were last used; the keys are listed without it",
			"account", account, "error", err)
		return nil
	}
	out := make(map[string]time.Time, len(keys))
	for _, k := range keys {
		if t, ok := all[k.ID]; ok {
			out[k.ID] = t
		}
	}
	return out
}

// visible reports whether the principal may see key k of its account.
func (m *Manager) visible(p *tollgate.Principal, k auth.Key) bool {
	return p.WholeAccount() || k.ID == p.Key.ID || m.mayManage(p, k) == nil
}

// visibleKeys returns the page of the keys of p's account that q selects, of those p
// may see. For a caller that sees only some keys, the store is read a page at a time
// until the page is full or the keys end; the page continues after its last key.
func (m *Manager) visibleKeys(ctx context.Context, p *tollgate.Principal, q auth.KeyQuery) (auth.KeyPage, error) {
	q.Account = p.Account.ID
	if p.WholeAccount() {
		page, err := m.keys.Keys(ctx, q)
		if err != nil {
			return auth.KeyPage{}, m.keyQueryError(ctx, q, err)
		}
		return page, nil
	}
	size := cmp.Or(q.Limit, auth.DefaultKeyPage)
	out := auth.KeyPage{Keys: []auth.Key{}}
	read := auth.KeyQuery{Account: q.Account, After: q.After, Limit: auth.MaxKeyPage}
	for {
		page, err := m.keys.Keys(ctx, read)
		if err != nil {
			return auth.KeyPage{}, m.keyQueryError(ctx, q, err)
		}
		for _, k := range page.Keys {
			if !m.visible(p, k) {
				continue
			}
			if len(out.Keys) == size {
				out.Next = out.Keys[size-1].ID
				return out, nil
			}
			out.Keys = append(out.Keys, k)
		}
		if page.Next == "" {
			return out, nil
		}
		read.After = page.Next
	}
}

// CreateOwnKey creates a sub-key of the caller's account and returns it with its value,
// shown this once. Its restrictions must be within the caller's own key's and the
// account's; a wider one is CodeForbidden naming the field that widens. spec.Value must
// be empty: the value is always random.
func (m *Manager) CreateOwnKey(ctx context.Context, c tollgate.Caller, spec NewKey) (auth.Key, string, error) {
	ctx, p, err := m.self(ctx, c)
	if err != nil {
		return auth.Key{}, "", err
	}
	if err := notSuspended(&p, "created"); err != nil {
		return auth.Key{}, "", err
	}
	if spec.Value != "" {
		return auth.Key{}, "", newError(tollgate.CodeInvalidInput, "value: a key's value is chosen at random; leave it out", nil)
	}
	if !p.WholeAccount() && !m.subKeysManage {
		return auth.Key{}, "", m.mayManage(&p, auth.Key{})
	}
	if err := m.narrowing(&p, spec.Restrictions); err != nil {
		return auth.Key{}, "", err
	}
	if err := m.spend(ctx, p.Account.ID); err != nil {
		return auth.Key{}, "", err
	}
	k, v, err := m.createKey(ctx, p.Account.ID, spec, m.ownKeyLimit())
	if errors.Is(err, auth.ErrTooManyKeys) {
		msg := fmt.Sprintf("the account holds %d keys, the most self-service lets it hold", m.maxOwnKeys)
		if m.keyRetention > 0 {
			msg += fmt.Sprintf(" (keys revoked within the last %s count too): revoke keys it no longer uses, or ask the operator; a revoked key stops counting once its revocation is older than that", days(m.keyRetention))
		} else {
			msg += " (revoked keys count too): ask the operator"
		}
		return auth.Key{}, "", newError(tollgate.CodeConflict, msg, err)
	}
	return k, v, err
}

// days writes a duration in days when it is a whole number of them.
func days(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == day:
		return "day"
	case d%day == 0:
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}

// narrowing refuses restrictions wider than the caller's own key's or the account's.
func (m *Manager) narrowing(p *tollgate.Principal, r auth.Restrictions) error {
	for _, outer := range []struct {
		r     auth.Restrictions
		owner string
	}{{p.Key.Restrictions, "your key"}, {p.Account.Restrictions, "your account"}} {
		if err := r.WithinOf(outer.r, outer.owner); err != nil {
			return newError(tollgate.CodeForbidden, "the restrictions are wider than "+outer.owner+"'s: "+unwrapWidens(err), err)
		}
	}
	return nil
}

// RotateOwnKey gives a key of the caller's account a new value, returned this once; the
// old value stops working at once. The primary key may be rotated (by itself or a
// session).
func (m *Manager) RotateOwnKey(ctx context.Context, c tollgate.Caller, keyID string) (auth.Key, string, error) {
	ctx, p, k, err := m.managed(ctx, c, keyID)
	if err == nil {
		err = notSuspended(&p, "rotated")
	}
	if err != nil {
		return auth.Key{}, "", err
	}
	if k.Revoked() {
		return auth.Key{}, "", newError(tollgate.CodeConflict, fmt.Sprintf("key %q is revoked; a revoked key cannot be rotated", keyID), nil)
	}
	if err := m.spend(ctx, k.AccountID); err != nil {
		return auth.Key{}, "", err
	}
	// The rotation applies only to the record the rules were judged on: a key widened
	// meanwhile (whose value the caller may not have) is left as it is.
	return m.rotateKey(ctx, k.ID, k.Revision, k.AccountID)
}

// RevokeOwnKey revokes a sub-key of the caller's account; the very next call with it is
// refused. The primary key cannot be revoked through self-service.
func (m *Manager) RevokeOwnKey(ctx context.Context, c tollgate.Caller, keyID string) (auth.Key, error) {
	ctx, _, k, err := m.managed(ctx, c, keyID)
	if err != nil {
		return auth.Key{}, err
	}
	if k.Primary {
		return auth.Key{}, newError(tollgate.CodeForbidden, "the primary key cannot be revoked through self-service: rotate it instead, or ask the operator", nil)
	}
	return m.revokeKey(ctx, k.ID, k.Revision)
}

// UpdateOwnKey renames a sub-key of the caller's account or narrows its restrictions.
// New restrictions must be within the key's current ones (and so within the caller's
// and the account's); a widening is CodeForbidden naming the field that widens. The
// primary key cannot be changed through self-service.
func (m *Manager) UpdateOwnKey(ctx context.Context, c tollgate.Caller, keyID string, change KeyChange) (auth.Key, error) {
	ctx, p, k, err := m.managed(ctx, c, keyID)
	if err == nil {
		err = notSuspended(&p, "changed")
	}
	if err != nil {
		return auth.Key{}, err
	}
	if k.Primary {
		return auth.Key{}, newError(tollgate.CodeForbidden, "the primary key cannot be changed through self-service; create a sub-key with the name and restrictions you want", nil)
	}
	if k.Revoked() {
		return auth.Key{}, newError(tollgate.CodeConflict, fmt.Sprintf("key %q is revoked; a revoked key cannot be changed", keyID), nil)
	}
	if err := m.spend(ctx, k.AccountID); err != nil {
		return auth.Key{}, err
	}
	// The check runs on the record the update applies to, read again if it changed.
	return m.updateKey(ctx, keyID, change, func(old, updated auth.Key) error {
		if old.Primary || old.AccountID != p.Account.ID {
			return newError(tollgate.CodeForbidden, "the key cannot be changed through self-service", nil)
		}
		if err := updated.Restrictions.WithinOf(old.Restrictions, "the key now"); err != nil {
			return newError(tollgate.CodeForbidden, "an update may only narrow a key: "+unwrapWidens(err), err)
		}
		return m.mayManage(&p, old)
	})
}

// OwnAuditLog returns a page of the audit log of the caller's account (q.Account is
// set to it), newest first. The log tells of every key of the account (their
// restrictions, the addresses they were changed from, the sessions of the primary
// key), so only the caller that may see every key reads it: the primary key, a session
// acting as it, or a session that names no key. A sub-key may not, even with
// [Options.SubKeysManageKeys]. Of a change made by an operator or by the host's code,
// the account holder sees what changed and when, and who made it as "operator" or
// "host", but not the operator's name, the address it came from, nor the reason given
// for a credit adjustment, which are the operator's own notes (see holderView).
func (m *Manager) OwnAuditLog(ctx context.Context, c tollgate.Caller, q audit.Query) (audit.Page, error) {
	_, p, err := m.self(ctx, c)
	if err != nil {
		return audit.Page{}, err
	}
	if !p.WholeAccount() {
		return audit.Page{}, newError(tollgate.CodeForbidden, "a sub-key cannot read the audit log, which tells of every key of the account: use the account's primary key, or a session started with it", nil)
	}
	q.Account = p.Account.ID
	page, err := m.AuditLog(ctx, q)
	for i := range page.Entries {
		page.Entries[i] = holderView(page.Entries[i])
	}
	return page, err
}

// OwnUsage answers a usage query (see [Manager.Usage]) about the caller's account:
// q.Account is set to it. The primary key, a session acting as it, and a session that
// names no key see the whole account; any other key, or a session it started, sees only
// its own calls: q.Key is set to its id, and naming another key is CodeForbidden (the
// message begins with "key:"). Reading usage is free and no rate-limit event, and the
// key's channel and API lists do not apply. Its other errors are those of
// [Manager.Usage]: CodeNotFound when the service records no usage.
func (m *Manager) OwnUsage(ctx context.Context, c tollgate.Caller, q usage.Query) (usage.Result, error) {
	_, p, err := m.self(ctx, c)
	if err != nil {
		return usage.Result{}, err
	}
	q.Account = p.Account.ID
	if !p.WholeAccount() {
		if q.Key != "" && q.Key != p.Key.ID {
			return usage.Result{}, newError(tollgate.CodeForbidden,
				"key: this key sees only its own usage; ask with the account's primary key, or a session started with it, to see other keys", nil)
		}
		q.Key = p.Key.ID
	}
	return m.Usage(ctx, q)
}

// balance returns the principal's account balance.
func (m *Manager) balance(ctx context.Context, p *tollgate.Principal) (billing.Balance, error) {
	_, b, err := m.balanceAt(ctx, &p.Account, m.now())
	if err != nil {
		return b, m.unavailable(ctx, "ledger", err)
	}
	return b, nil
}
