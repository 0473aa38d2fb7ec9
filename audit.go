package tollgate

import (
	"context"
	"errors"
	"net/netip"
	"strings"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
)

// The audit log. With [Options.Audit] set, every change that the management methods
// make (CreateAccount, CreateKey, RotateKey, RevokeKey, AdjustCredits) is recorded
// once it is stored: who made it, what it was, when and from which address. Who made
// it comes from the context ([WithActor]); the admin handler names the operator, and a
// host's own calls are recorded as [audit.Host]. An entry never holds a key value.
//
// The call returns once its change is stored and its entry appended, or, if the audit
// log cannot take the entry (it is down), queued: a bounded queue ([Options.AuditQueue])
// retries it in the background with backoff, and [Service.Close] makes a last attempt.
// Each entry has a random ID, so a retry after an append whose outcome is unknown
// stores it once. Entries older than [Options.AuditRetention] are pruned on a schedule.

// Actor is who makes a change, as the audit log records it and events tell it: the id
// of the key that authenticated the change, [audit.Operator] (or "operator:" and a
// name), or another name the host gives (empty is [audit.Host]), and the address the
// change was requested from, if known.
type Actor = event.Actor

// actorKey is the context key of the Actor.
type actorKey struct{}

// WithActor returns a copy of ctx that names the actor of the changes made with it,
// for the audit log.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// holderView returns e as an account holder sees it in their audit log. A change made
// by an operator ([audit.Operator], or "operator:" and a name) or by the host's own
// code ([audit.Host], or another name the host gave) is shown with what changed and
// when, its actor as "operator" or "host", without the address it was made from, and,
// for a credit adjustment, without the free-text reason the operator gave: the
// operator's name, network and notes are theirs. Reasons the service writes (a key's
// rename) stay. A change made by one of the account's keys, or a session of the
// account, is shown whole.
func holderView(e audit.Entry) audit.Entry {
	switch {
	case e.Actor == audit.Operator || strings.HasPrefix(e.Actor, audit.Operator+":"):
		e.Actor = audit.Operator
	case e.Actor == audit.Session || strings.HasPrefix(e.Actor, audit.Session+":") || strings.HasPrefix(e.Actor, auth.KeyIDPrefix):
		return e
	default:
		e.Actor = audit.Host
	}
	e.Addr = netip.Addr{}
	if e.Action == audit.CreditsAdjust {
		e.Reason = ""
	}
	return e
}

// actorOf returns the actor ctx names, or [audit.Host].
func actorOf(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	if a.ID == "" {
		a.ID = audit.Host
	}
	return a
}

// PruneAuditLog deletes the audit log's entries older than [Options.AuditRetention],
// now, and returns how many it deleted (see [audit.Log.Prune]). It does nothing without
// an audit log or a retention.
func (s *Service) PruneAuditLog(ctx context.Context) (int64, error) {
	if s.audit == nil {
		return 0, nil
	}
	return s.audit.Prune(ctx)
}

// AuditLog returns a page of the audit log that q selects, newest first. It is
// CodeNotFound when the service keeps no audit log ([Options.Audit]), and
// CodeInvalidInput for a query out of bounds (see [audit.Query]).
func (s *Service) AuditLog(ctx context.Context, q audit.Query) (audit.Page, error) {
	if s.audit == nil {
		return audit.Page{}, newError(CodeNotFound, "this service keeps no audit log (tollgate.Options.Audit is not set)", nil)
	}
	if err := checkText("account_id", q.Account, maxIDLength); err != nil {
		return audit.Page{}, err
	}
	p, err := s.audit.Store().List(ctx, q)
	switch {
	case errors.Is(err, audit.ErrBadCursor):
		return audit.Page{}, newError(CodeInvalidInput, "cursor is not one a page of the audit log returned: pass its next as it is", err)
	case errors.Is(err, store.ErrInvalid):
		// The store's words name the store and its packages: they stay in Err.
		return audit.Page{}, newError(CodeInvalidInput, "the audit query cannot be answered: give a limit from 1 to 1000 and a cursor from a page's next", err)
	}
	if err != nil {
		return audit.Page{}, s.unavailable(ctx, "audit log", err)
	}
	return p, nil
}
