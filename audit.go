package tollgate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
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

// Actor is who makes a change, as the audit log records it.
type Actor struct {
	// ID is the id of the key that authenticated the change, [audit.Operator] (or
	// "operator:" and a name), or another name the host gives. Empty is [audit.Host].
	ID string
	// Addr is the address the change was requested from, if known.
	Addr netip.Addr
}

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

// record appends e, made now by the actor ctx names, to the audit log, if there is one,
// with a new random ID unless e has one. The change is already stored, so a failure does not undo it nor
// fail the request (a rotation's new value would be lost): an entry the audit log cannot
// take now is queued and retried in the background (see [Service.PendingAuditEntries]).
func (s *Service) record(ctx context.Context, now time.Time, e audit.Entry) {
	if s.audit == nil {
		return
	}
	actor := actorOf(ctx)
	e.At, e.Actor, e.Addr = now, actor.ID, actor.Addr
	if e.ID == "" {
		e.ID = rand.Text()
	}
	s.auditq.add(ctx, e)
}

// PendingAuditEntries returns the number of audit entries that the audit log could not
// take when they were recorded and that the service is still retrying in the background.
// It is at most [Options.AuditQueue]; it is zero without an audit log.
func (s *Service) PendingAuditEntries() int {
	if s.auditq == nil {
		return 0
	}
	return s.auditq.pending()
}

// DroppedAuditEntries returns the number of audit entries that the audit log will never
// hold: recorded while [Options.AuditQueue] entries were already waiting for it, still
// waiting when [Service.Close] made its last attempt, or refused by it as invalid. Each
// was logged (at WARN, or at ERROR for an invalid one) with everything it held, which is
// never a key value. The changes they record are stored all the same.
func (s *Service) DroppedAuditEntries() int64 {
	if s.auditq == nil {
		return 0
	}
	return s.auditq.droppedCount()
}

// PruneAuditLog deletes the audit log's entries older than [Options.AuditRetention],
// now, and returns how many it deleted. The service calls it every
// [Options.AuditPruneInterval]; a host that turned that off may call it on its own
// schedule. It does nothing without an audit log or a retention. Its error is the
// store's (store.ErrUnavailable while the audit log is down). Any number of
// instances may prune the same log at once: each deletes what the others have not.
func (s *Service) PruneAuditLog(ctx context.Context) (int64, error) {
	if s.audit == nil || s.retention <= 0 {
		return 0, nil
	}
	n, err := s.audit.Prune(ctx, s.now().Add(-s.retention))
	if err != nil {
		return n, fmt.Errorf("tollgate: prune the audit log: %w", err)
	}
	return n, nil
}

// pruneOnce is one run of the background prune of the audit log.
func (s *Service) pruneOnce(ctx context.Context) {
	n, err := s.PruneAuditLog(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("tollgate: cannot prune the audit log; the next prune tries again", "error", err)
	case n > 0:
		s.log.Info("tollgate: pruned the audit log's entries older than the retention", "count", n, "retention", s.retention.String())
	}
}

// restrictionsJSON is r's plain JSON form for an audit entry; nil for no restrictions.
func restrictionsJSON(r auth.Restrictions) json.RawMessage {
	if r.IsZero() {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil // Spec is plain data: this does not happen
	}
	return b
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
	p, err := s.audit.List(ctx, q)
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
