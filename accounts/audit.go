package accounts

import (
	"context"
	"errors"
	"net/netip"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
)

// The audit log. An [audit.Log] subscribed to the service's events records every
// change that a Manager makes (accounts, keys, credits, sessions) once it is stored:
// who made it, what it was, when and from which address. Who made it comes from the
// context ([WithActor]); the admin handler names the operator, and a host's own calls
// are recorded as [audit.Host]. An entry never holds a key value. The Manager reads
// the log ([Options].Audit) for operators and, through [holderView], for account
// holders.

// actorKey is the context key of the Actor.
type actorKey struct{}

// WithActor returns a copy of ctx that names the actor of the changes made with it,
// for the audit log.
func WithActor(ctx context.Context, a event.Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// holderView returns e as an account holder sees it in their audit log. A change made
// by an operator ([audit.Operator], or "operator:" and a name) or by the host's own
// code ([audit.Host], or another name the host gave) is shown with what changed and
// when, its actor as "operator" or "host", without the address it was made from, and,
// for a credit adjustment, a suspension, a reactivation or a closure, without the
// free-text reason the operator gave: the operator's name, network and notes are
// theirs. Reasons the service writes (a key's rename) stay. A change made by one of
// the account's keys, a session of the account, or the service itself
// ([audit.Service]), is shown whole.
func holderView(e audit.Entry) audit.Entry {
	switch {
	case e.Actor == audit.Operator || strings.HasPrefix(e.Actor, audit.Operator+":"):
		e.Actor = audit.Operator
	case e.Actor == audit.Session || strings.HasPrefix(e.Actor, audit.Session+":") || strings.HasPrefix(e.Actor, auth.KeyIDPrefix),
		e.Actor == audit.Service:
		return e
	default:
		e.Actor = audit.Host
	}
	e.Addr = netip.Addr{}
	switch e.Action {
	case audit.CreditsAdjust, audit.AccountSuspend, audit.AccountReactivate, audit.AccountClose:
		e.Reason = ""
	}
	return e
}

// actorOf returns the actor ctx names, or [audit.Host].
func actorOf(ctx context.Context) event.Actor {
	a, _ := ctx.Value(actorKey{}).(event.Actor)
	if a.ID == "" {
		a.ID = audit.Host
	}
	return a
}

// AuditLog returns a page of the audit log that q selects, newest first. It is
// CodeNotFound when the service keeps no audit log ([Options].Audit), and
// CodeInvalidInput for a query out of bounds (see [audit.Query]).
func (m *Manager) AuditLog(ctx context.Context, q audit.Query) (audit.Page, error) {
	if m.auditDB == nil {
		return audit.Page{}, newError(tollgate.CodeNotFound, "this service keeps no audit log (accounts.Options.Audit is not set)", nil)
	}
	if err := checkText("account_id", q.Account, maxIDLength); err != nil {
		return audit.Page{}, err
	}
	p, err := m.auditDB.List(ctx, q)
	switch {
	case errors.Is(err, audit.ErrBadCursor):
		return audit.Page{}, newError(tollgate.CodeInvalidInput, "cursor is not one a page of the audit log returned: pass its next as it is", err)
	case errors.Is(err, store.ErrInvalid):
		// The store's words name the store and its packages: they stay in Err.
		return audit.Page{}, newError(tollgate.CodeInvalidInput, "the audit query cannot be answered: give a limit from 1 to 1000 and a cursor from a page's next", err)
	}
	if err != nil {
		return audit.Page{}, m.unavailable(ctx, "audit log", err)
	}
	return p, nil
}
