package tollgate

import (
	"context"

	"github.com/tollgate-dev/tollgate/auth"
)

// A suspended account ([auth.AccountSuspended]) authenticates as any other, so that
// its holder may still sign in and read the account, its keys and its usage (package
// accounts), but every call of its keys is refused with CodeAccountSuspended: once the
// call is known to name an API, before its input is read, its admission or its charge.
// The refusal takes no rate-limit event, is never charged, and is published as any
// refusal is (event.CallRefused, with its code).
//
// The refusal holds on every instance from the very next call, key cache or not: a
// principal from the cache that still says the account is active is caught by its
// admission, whose key check carries the account's revision (a suspension changes it),
// and is read again; one from the cache that says the account is suspended is checked
// against the key store before it is refused, so that a reactivation holds as soon. A
// call answered without an admission after that (its input refused, a batch's kept
// answer replayed) checks a principal from the cache first (refuseLate), and is refused
// as suspended as it would be on an instance whose record is current.

// suspendedMessage is what a call of a suspended account is told.
const suspendedMessage = "the account is suspended: its calls are refused until the operator reactivates it; contact the operator"

// callable returns nil if p's account may call, else the refusal: CodeAccountSuspended
// for a suspended account, or, for a principal from the key cache whose key or account
// changed since it was cached, the error the key now deserves. It may refresh p.
func (s *Service) callable(ctx context.Context, p *Principal) error {
	if p.Account.State != auth.AccountSuspended {
		return nil
	}
	if p.Cached {
		if err := s.verify(ctx, p); err != nil {
			return err
		}
		if p.Account.State != auth.AccountSuspended {
			return nil
		}
	}
	return newError(CodeAccountSuspended, suspendedMessage, nil)
}

// refuseLate is refuse for an answer given after callable let the call through, and
// before its admission judged it: a refusal (an input, a batch or an idempotency key
// that is not valid, a conflict of its idempotency record) or an answer of nothing run
// (err nil: a batch's kept answer replayed, a batch none of whose items is valid). A
// principal from the key cache is checked against the key store first, as refuse
// does, and if its account is suspended, that is the answer: an instance whose cache
// is stale answers as one whose record is current, which refused the call in
// callable.
func (s *Service) refuseLate(ctx context.Context, p *Principal, err error, rc Receipt, apis ...string) Reply {
	if p.Cached && CodeOf(err) != CodeUnavailable {
		if verr := s.verify(ctx, p); verr != nil {
			return Reply{Err: verr}
		}
		if serr := s.callable(ctx, p); serr != nil {
			err = serr
		}
	}
	return s.refuse(ctx, p, err, rc, apis...)
}
