package accounts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
)

// The lifecycle of an account, for operators: an account is active when it is created;
// an operator may suspend it and reactivate it any number of times, and close it once;
// a closed account is never reopened, and once [Options.ClosedRetention] has passed
// since its closure it may be deleted.
//
//   - Suspended ([auth.AccountSuspended]): every call of its keys is refused with
//     CodeAccountSuspended (403 account_suspended), on every instance from the next
//     call, key cache or not; nothing is charged and no rate-limit event is taken. Its
//     keys, balance and history are kept. Its holder may still sign in and read the
//     account, its keys, usage and audit log, and revoke keys, but not create, rotate
//     or change keys (CodeAccountSuspended) until it is reactivated.
//   - Closed ([auth.AccountClosed]): every key of the account is revoked, and answers as
//     a revoked key does (403 forbidden), as does a key the closure has not reached
//     yet; a session of the account ends. Calls in flight when it is closed finish
//     and settle normally, and reservations left open by calls that never settle are
//     voided at their expiry by the sweep: open reservations are settled or voided,
//     never left. Its records are kept for [Options.ClosedRetention].
//   - Deleted: the account and its keys are gone from the key store; its id may be
//     used again. The ledger's records of its credits, the audit log and the usage
//     statistics are kept under their own retention.
//
// Each change reads the account and writes it back conditioned on the revision it read
// (a change that raced with another is decided again on the new record, a few times),
// is recorded in the audit log and published on the service's events
// ([event.AccountSuspended], [event.AccountReactivated], [event.AccountClosed],
// [event.AccountDeleted]). A change to the state the account is already in changes
// nothing and publishes nothing.

// DefaultClosedRetention is the default [Options.ClosedRetention].
const DefaultClosedRetention = 90 * 24 * time.Hour

// Accounts returns a page of the accounts that q selects, in the order of their ids,
// for operators. q.Limit is at most [auth.MaxAccountPage]
// ([auth.DefaultAccountPage] for 0); q.After is the Next of the page before. A page
// may hold fewer accounts than the limit, even none, while Next is set: the key store
// bounds the accounts one page examines, so that a selective filter does not read
// every account in one request. A listing goes on until Next is empty; it lists once
// every account that exists throughout it. A query out of bounds is CodeInvalidInput
// naming the parameter (limit, state, plan, id_prefix, cursor, created_from). Each
// account reads as it is now (see [Info].Account); q.Plan selects by the plan its
// record names, which a change of plan that waited for a renewal replaces when the
// record is written again (a change of its plan or of its state).
func (m *Manager) Accounts(ctx context.Context, q auth.AccountQuery) (auth.AccountPage, error) {
	if err := checkAccountQuery(q); err != nil {
		return auth.AccountPage{}, err
	}
	page, err := m.keys.Accounts(ctx, q)
	if errors.Is(err, auth.ErrBadAccountQuery) {
		return auth.AccountPage{}, newError(tollgate.CodeInvalidInput, fmt.Sprintf(
			"the listing of accounts cannot be answered: give a limit from 1 to %d, a state of active, suspended or closed, and a cursor from a page's next", auth.MaxAccountPage), err)
	}
	if err != nil {
		return auth.AccountPage{}, m.unavailable(ctx, "accounts", err)
	}
	if page.Accounts == nil {
		page.Accounts = []auth.Account{}
	}
	now := m.now()
	for i := range page.Accounts {
		page.Accounts[i] = m.current(page.Accounts[i], now)
	}
	return page, nil
}

// checkAccountQuery refuses a listing of accounts out of bounds before any store is
// asked.
func checkAccountQuery(q auth.AccountQuery) error {
	switch {
	case q.Limit < 0 || q.Limit > auth.MaxAccountPage:
		return newError(tollgate.CodeInvalidInput, fmt.Sprintf("limit: a page holds 1 to %d accounts", auth.MaxAccountPage), nil)
	case q.State != "" && !q.State.Valid():
		return newError(tollgate.CodeInvalidInput, fmt.Sprintf("state: %q is not a state of an account; give active, suspended or closed", q.State), nil)
	case !q.CreatedFrom.IsZero() && !q.CreatedBefore.IsZero() && !q.CreatedFrom.Before(q.CreatedBefore):
		return newError(tollgate.CodeInvalidInput, "created_from must be before created_before", nil)
	}
	for _, f := range []struct{ name, value string }{{"plan", q.Plan}, {"id_prefix", q.IDPrefix}, {"cursor", q.After}} {
		if err := checkText(f.name, f.value, maxIDLength); err != nil {
			return err
		}
	}
	return nil
}

// SuspendAccount suspends an account: every call of its keys is refused with
// CodeAccountSuspended until [Manager.ReactivateAccount] (see the lifecycle above). The
// reason is required; it is recorded in the audit log and published with the change.
// Suspending a suspended account changes nothing and returns it as it is; a closed
// account is CodeConflict.
func (m *Manager) SuspendAccount(ctx context.Context, id, reason string) (auth.Account, error) {
	if err := checkReason(reason, true, "say why the account is suspended"); err != nil {
		return auth.Account{}, err
	}
	return m.changeState(ctx, id, auth.AccountSuspended, reason)
}

// ReactivateAccount makes a suspended account active again: its keys call as before
// from their next call, on every instance. The reason is optional. Reactivating an
// active account changes nothing and returns it as it is; a closed account is
// CodeConflict: closure is final.
func (m *Manager) ReactivateAccount(ctx context.Context, id, reason string) (auth.Account, error) {
	if err := checkReason(reason, false, ""); err != nil {
		return auth.Account{}, err
	}
	return m.changeState(ctx, id, auth.AccountActive, reason)
}

// CloseAccount closes an account for good: its state becomes closed, then every key
// of the account is revoked (each revocation recorded and published as any other),
// and its sessions end with them. Calls in flight settle normally; the reservations
// of calls that never settle are voided at their expiry by the sweep. The reason is
// required. The account is kept for [Options.ClosedRetention], then
// [Manager.DeleteAccount] may delete it.
//
// Closing a closed account revokes any key still live and publishes no second
// closure: a closure interrupted by an outage (the error says so) is finished by
// calling CloseAccount again.
func (m *Manager) CloseAccount(ctx context.Context, id, reason string) (auth.Account, error) {
	if err := checkReason(reason, true, "say why the account is closed"); err != nil {
		return auth.Account{}, err
	}
	acct, err := m.changeState(ctx, id, auth.AccountClosed, reason)
	if err != nil {
		return auth.Account{}, err
	}
	if err := m.revokeAll(ctx, id); err != nil {
		e := m.unavailable(ctx, "keys of account", err)
		if e.Code == tollgate.CodeUnavailable {
			e.Message = fmt.Sprintf("the account %q is closed, but not every key of it could be revoked (they are refused all the same): close it again to finish; %s", id, e.Message)
		}
		return auth.Account{}, e
	}
	return acct, nil
}

// DeleteAccount deletes a closed account and its keys from the key store, once
// [Options.ClosedRetention] has passed since its closure. Before that, or for an
// account that is not closed, it is CodeConflict, saying when the account may be
// deleted (or that it must be closed first). The ledger's records of its credits, the
// audit log and the usage statistics are kept under their own retention. Afterwards the
// account is CodeNotFound, and [Manager.CreateAccount] refuses its id (CodeConflict)
// while the ledger keeps its balance: a new account would inherit it.
func (m *Manager) DeleteAccount(ctx context.Context, id string) error {
	if err := checkText("account_id", id, maxIDLength); err != nil {
		return err
	}
	acct, err := m.keys.Account(ctx, id)
	if err != nil {
		return m.manageError(ctx, "account", id, err)
	}
	if acct.State != auth.AccountClosed {
		msg := fmt.Sprintf("the account %q is %s; only a closed account can be deleted: close it first", id, acct.State.OrActive())
		if m.closedRetention > 0 {
			msg += fmt.Sprintf(", then delete it once %s have passed", days(m.closedRetention))
		}
		return newError(tollgate.CodeConflict, msg, nil)
	}
	now := m.now()
	if from := m.deletableAt(acct); now.Before(from) {
		return newError(tollgate.CodeConflict, fmt.Sprintf(
			"the account %q was closed at %s and is kept for %s: it can be deleted from %s",
			id, acct.StateChangedAt.UTC().Format(time.RFC3339), days(m.closedRetention), from.UTC().Format(time.RFC3339)), nil)
	}
	c := m.newChange(ctx, now, event.Change{Type: event.AccountDeleted, Account: id})
	if err := m.keys.DeleteAccount(m.journaled(ctx, c), id); err != nil {
		if errors.Is(err, auth.ErrAccountNotClosed) {
			return newError(tollgate.CodeConflict, fmt.Sprintf("the account %q is no longer closed; read it again", id), err)
		}
		return m.manageError(ctx, "account", id, err)
	}
	m.publish(ctx, c)
	return nil
}

// DeletableAt returns when a closed account may be deleted ([Manager.DeleteAccount]):
// its closure plus [Options.ClosedRetention]. It returns the zero time for an account
// that is not closed.
func (m *Manager) DeletableAt(acct auth.Account) time.Time {
	if acct.State != auth.AccountClosed {
		return time.Time{}
	}
	return m.deletableAt(acct)
}

func (m *Manager) deletableAt(acct auth.Account) time.Time {
	if m.closedRetention < 0 {
		return acct.StateChangedAt
	}
	return acct.StateChangedAt.Add(m.closedRetention)
}

// changeState moves an account to state, for reason, and publishes the change; an
// account already in state is returned as it is, with nothing published. The account
// is read and written back conditioned on its revision; a write that lost to another
// change is decided again on the new record, a few times.
func (m *Manager) changeState(ctx context.Context, id string, to auth.AccountState, reason string) (auth.Account, error) {
	if err := checkText("account_id", id, maxIDLength); err != nil {
		return auth.Account{}, err
	}
	for attempt := 0; ; attempt++ {
		acct, err := m.keys.Account(ctx, id)
		if err != nil {
			return auth.Account{}, m.manageError(ctx, "account", id, err)
		}
		from := acct.State.OrActive()
		switch {
		case from == to:
			return acct, nil
		case from == auth.AccountClosed:
			return auth.Account{}, closedError(id, to, auth.ErrAccountClosed)
		}
		now := m.now()
		// The record is written as it reads now: a change of plan due at a renewal
		// that has passed is applied.
		cur := m.current(acct, now)
		u := cur.Update()
		u.State, u.StateChangedAt = to, now
		c := m.newChange(ctx, now, event.Change{Type: stateEvent(to), Account: id, Reason: reason})
		updated, err := m.keys.UpdateAccount(m.journaled(ctx, c), u)
		switch {
		case err == nil:
			m.publish(ctx, c)
			return updated, nil
		case errors.Is(err, auth.ErrAccountClosed):
			return auth.Account{}, closedError(id, to, err)
		case !errors.Is(err, auth.ErrAccountChanged):
			return auth.Account{}, m.manageError(ctx, "account", id, err)
		case attempt == updateAttempts-1:
			return auth.Account{}, newError(tollgate.CodeConflict, fmt.Sprintf(
				"the account %q kept changing while it was being changed; read it again and retry", id), err)
		}
		// Another change was stored since the account was read: decide again.
	}
}

// stateEvent is the kind of the change of an account to state.
func stateEvent(state auth.AccountState) event.Kind {
	switch state {
	case auth.AccountSuspended:
		return event.AccountSuspended
	case auth.AccountClosed:
		return event.AccountClosed
	}
	return event.AccountReactivated
}

// closedError is the refusal of a change of a closed account to state.
func closedError(id string, to auth.AccountState, cause error) *tollgate.Error {
	verb := map[auth.AccountState]string{auth.AccountSuspended: "suspended", auth.AccountActive: "reactivated"}[to]
	return newError(tollgate.CodeConflict, fmt.Sprintf("the account %q is closed; a closed account cannot be %s: closure is final", id, verb), cause)
}

// revokeAll revokes every live key of an account, a page at a time, publishing each
// revocation. A key deleted meanwhile (a revoked key pruned) is skipped; a cursor whose
// key was pruned starts the listing again, which skips the keys already revoked.
func (m *Manager) revokeAll(ctx context.Context, id string) error {
	q := auth.KeyQuery{Account: id, Limit: auth.MaxKeyPage}
	for restarts := 0; ; {
		page, err := m.keys.Keys(ctx, q)
		if errors.Is(err, auth.ErrBadKeyQuery) && q.After != "" && restarts < updateAttempts {
			q.After, restarts = "", restarts+1
			continue
		}
		if err != nil {
			return err
		}
		for _, k := range page.Keys {
			if k.Revoked() {
				continue
			}
			c := m.newChange(ctx, m.now(), event.Change{Type: event.KeyRevoked, Account: k.AccountID, Key: k.ID})
			_, err := m.keys.RevokeKey(m.journaled(ctx, c), k.ID, auth.AnyRevision, c.At)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			m.publish(ctx, c)
		}
		if page.Next == "" {
			return nil
		}
		q.After = page.Next
	}
}

// checkReason checks the reason of a change of state: printable text of at most
// maxReasonLength characters, and not blank if required (why says what to give).
func checkReason(reason string, required bool, why string) error {
	if err := checkText("reason", reason, maxReasonLength); err != nil {
		return err
	}
	if required && strings.TrimSpace(reason) == "" {
		return newError(tollgate.CodeInvalidInput, "reason is required: "+why, nil)
	}
	return nil
}

// notSuspended refuses a self-service change of keys (done says which: "created",
// "rotated", "changed") for a principal whose account is suspended.
func notSuspended(p *tollgate.Principal, done string) error {
	if p.Account.State != auth.AccountSuspended {
		return nil
	}
	return newError(tollgate.CodeAccountSuspended, fmt.Sprintf(
		"the account is suspended: keys cannot be %s until the operator reactivates it; contact the operator (you may still read the account, its keys and usage, and revoke keys)", done), nil)
}
