package tollgate

import (
	"context"
	"errors"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/store"
)

// refuse makes the reply of a call refused after its caller was authenticated, with
// err (nil for a call with nothing to run) and the receipt as far as the call got.
// A key that came from the key cache and that no admission checked is checked first, so
// that a rotated or revoked key gets its own answer rather than this one; the balance
// is read for the credit headers when the call did not get it. The refusal is recorded
// in the usage statistics for each of apis, the APIs the call named (see
// [Options.Usage]). A refusal because a store is unavailable (CodeUnavailable) goes to
// the stores no more: its cause is logged where it was found, and a second read would
// only fail, or wait, the same way.
func (s *Service) refuse(ctx context.Context, p *Principal, err error, rc Receipt, apis ...string) Reply {
	if CodeOf(err) == CodeUnavailable {
		s.refused(ctx, p, apis, err)
		rc.Plan = p.Plan
		return Reply{Err: err, Receipt: rc}
	}
	if p.Cached {
		if verr := s.verify(ctx, p); verr != nil {
			return Reply{Err: verr}
		}
	}
	if err != nil {
		s.refused(ctx, p, apis, err)
	}
	rc.Plan = p.Plan
	if rc.Balance == (billing.Balance{}) {
		if b, berr := s.balance(ctx, p); berr == nil {
			rc.Balance = b
		}
	}
	return Reply{Err: err, Receipt: rc}
}

// balance returns the principal's account balance, for the credit headers of calls
// that did not reach admission.
func (s *Service) balance(ctx context.Context, p *Principal) (billing.Balance, error) {
	now := s.now()
	b, err := s.meter.Ledger().Balance(ctx, p.Account.ID, now, billing.MonthOf(now), p.Plan.Credits)
	if err != nil {
		return b, s.unavailable(ctx, "ledger", err)
	}
	return b, nil
}

// Status returns the principal's account position, for the analytics endpoint. It
// changes nothing and costs nothing. Its Usage counts the whole account's calls for
// a principal that sees the whole account (the primary key, a session acting as it,
// a session that names no key), and only its key's own calls for any other (see
// [Service.OwnUsage]): those come from the usage statistics, and Usage is nil when
// the service records none.
func (s *Service) Status(ctx context.Context, p *Principal) (billing.Status, error) {
	if err := s.verify(ctx, p); err != nil {
		return billing.Status{}, err
	}
	st, err := s.meter.Status(ctx, p.Account.ID, p.Plan, s.now())
	if err != nil {
		return st, s.unavailable(ctx, "meter", err)
	}
	switch {
	case !managesAll(p):
		if st.Usage, err = s.keyCalls(ctx, p, st.Balance.Period); err != nil {
			return st, err
		}
	case st.Usage == nil:
		st.Usage = map[string]int64{}
	}
	return st, nil
}

// unavailable is the error of a store that failed with err while serving ctx, and
// which is answered 503 (CodeUnavailable): nothing the request asked for was done. It
// logs every such answer with its reason, at the level its kind deserves, judged by the
// request's context rather than by err (a store's own timeout wraps
// context.DeadlineExceeded too, and is an outage): INFO when the client canceled the
// request, WARN when the request's deadline passed, ERROR when the store failed while
// the request was live. A value the store cannot hold is the caller's mistake
// (CodeInvalidInput, INFO), and an err that is already an *Error is returned as it is
// (its maker answered for it).
func (s *Service) unavailable(ctx context.Context, what string, err error) *Error {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e
	}
	if errors.Is(err, store.ErrInvalid) {
		// The store cannot hold a value the caller sent: the caller's mistake, which
		// the checks at the edge should have caught.
		s.log.InfoContext(ctx, "tollgate: a store refused a value it cannot hold", "store", what, "error", err)
		return newError(CodeInvalidInput, "a value in the request cannot be stored: use valid UTF-8 text without NUL or control characters", err)
	}
	switch cause := ctx.Err(); {
	case errors.Is(cause, context.Canceled):
		s.log.InfoContext(ctx, "tollgate: answered 503: the client canceled the request before the store answered", "store", what, "error", err)
		return newError(CodeUnavailable, "the request was canceled before the service could answer; nothing was done and nothing was charged", err)
	case cause != nil:
		s.log.WarnContext(ctx, "tollgate: answered 503: the request's deadline passed before the store answered", "store", what, "error", err)
		return newError(CodeUnavailable, "the request's deadline passed before the service could answer; nothing was done and nothing was charged", err)
	}
	s.log.ErrorContext(ctx, "tollgate: answered 503: store unavailable", "store", what, "error", err)
	return newError(CodeUnavailable, "the service cannot reach its data store; nothing was done and nothing was charged; try again shortly", err)
}

func (s *Service) internal(what string, err error) *Error {
	s.log.Error("tollgate: internal error", "where", what, "error", err)
	return newError(CodeInternal, "internal error", err)
}
