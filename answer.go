package tollgate

import (
	"context"
	"errors"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/outage"
)

// refuse makes the reply of a call refused after its caller was authenticated, with
// err (nil for a call with nothing to run) and the receipt as far as the call got.
// A key that came from the key cache and that no admission checked is checked first, so
// that a rotated or revoked key gets its own answer rather than this one; the balance
// is read for the credit headers when the call did not get it. The refusal is published
// ([event.CallRefused]) with apis, the APIs the call named. A refusal because a store
// is unavailable (CodeUnavailable) goes to the stores no more: its cause is logged
// where it was found, and a second read would only fail, or wait, the same way.
func (s *Service) refuse(ctx context.Context, p *Principal, err error, rc Receipt, apis ...string) Reply {
	if CodeOf(err) == CodeUnavailable {
		s.refused(ctx, p, apis, err, billing.Balance{})
		rc.Plan = p.Plan
		return Reply{Err: err, Receipt: rc}
	}
	if p.Cached {
		if verr := s.verify(ctx, p); verr != nil {
			return Reply{Err: verr}
		}
	}
	rc.Plan = p.Plan
	if rc.Balance == (billing.Balance{}) {
		if b, berr := s.balance(ctx, p); berr == nil {
			rc.Balance = b
		}
	}
	if err != nil {
		s.refused(ctx, p, apis, err, rc.Balance)
	}
	return Reply{Err: err, Receipt: rc}
}

// balance returns the principal's account balance, for the credit headers of calls
// that did not reach admission.
func (s *Service) balance(ctx context.Context, p *Principal) (billing.Balance, error) {
	now := s.now()
	plan, period := s.terms(p, now)
	b, err := s.meter.Ledger().Balance(ctx, p.Account.ID, now, period, plan.Credits)
	if err != nil {
		return b, s.unavailable(ctx, "ledger", err)
	}
	b = b.WithUnspent(s.meter.Unspent(p.Account.ID))
	// The plan's allowance, whether or not the ledger has renewed to it yet (a plan
	// changed during the period).
	b.Allowance = plan.Credits
	return b, nil
}

// Status returns the principal's account position, for the analytics endpoint. It
// changes nothing and costs nothing. Its Usage, the calls per API of the period as the
// ledger counts them, is the whole account's, so it is set only for a principal that
// sees the whole account (the primary key, a session acting as it, a session that
// names no key); for any other it is nil (package accounts counts a key's own calls
// from the usage statistics).
func (s *Service) Status(ctx context.Context, p *Principal) (billing.Status, error) {
	if err := s.verify(ctx, p); err != nil {
		return billing.Status{}, err
	}
	now := s.now()
	plan, period := s.terms(p, now)
	st, err := s.meter.Status(ctx, p.Account.ID, plan, period, now)
	if err != nil {
		return st, s.unavailable(ctx, "meter", err)
	}
	switch {
	case !p.WholeAccount():
		st.Usage = nil
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
	v := outage.Judge(ctx, err)
	s.log.Log(ctx, v.Level, v.Log, "store", what, "error", err)
	if v.Invalid {
		return newError(CodeInvalidInput, v.Message, err)
	}
	return newError(CodeUnavailable, v.Message, err)
}

func (s *Service) internal(what string, err error) *Error {
	s.log.Error("tollgate: internal error", "where", what, "error", err)
	return newError(CodeInternal, "internal error", err)
}
