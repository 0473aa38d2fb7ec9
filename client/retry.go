package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Defaults of [RetryPolicy].
const (
	DefaultMaxAttempts = 3
	DefaultBaseDelay   = 250 * time.Millisecond
	DefaultMaxDelay    = 10 * time.Second
)

// A RetryPolicy retries the answers that waiting may fix (see [IsRetryable]): 429
// rate_limited and concurrency_limited, and 5xx. Credits exhausted, validation errors,
// 4xx answers and transport failures are returned at once, but for a batch sent with
// an idempotency key ([BatchOptions.IdempotencyKey]): the service runs it once however
// often it is sent, so it is also retried after a transport failure (the request or its
// answer lost on the way) and on a 409 (the first attempt still running).
//
// Before retry n (n = 1, 2, ...) it waits a random duration between 0 and
// min(MaxDelay, BaseDelay·2ⁿ⁻¹) ("full jitter"), or the answer's Retry-After if that is
// longer. When Retry-After asks for more than MaxDelay, it stops and returns the answer,
// since waiting that long is the caller's decision.
//
// The zero value of each field is its default. A policy is read, never modified, by
// the clients that use it.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first included. The default is
	// [DefaultMaxAttempts].
	MaxAttempts int
	// BaseDelay is the bound of the first wait. The default is [DefaultBaseDelay].
	BaseDelay time.Duration
	// MaxDelay bounds every wait. The default is [DefaultMaxDelay].
	MaxDelay time.Duration
	// Sleep waits for d, or returns ctx's error if ctx ends first. The default is
	// [Sleep]. Tests inject one that records d and returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) that picks the wait within its bound. The
	// default is math/rand/v2's Float64.
	Rand func() float64
}

// withDefaults returns a copy of p with the defaults filled in.
func (p *RetryPolicy) withDefaults() *RetryPolicy {
	q := *p
	if q.MaxAttempts < 1 {
		q.MaxAttempts = DefaultMaxAttempts
	}
	if q.BaseDelay <= 0 {
		q.BaseDelay = DefaultBaseDelay
	}
	if q.MaxDelay <= 0 {
		q.MaxDelay = DefaultMaxDelay
	}
	if q.Sleep == nil {
		q.Sleep = Sleep
	}
	if q.Rand == nil {
		q.Rand = rand.Float64
	}
	return &q
}

// delay returns how long to wait after the failed attempt number attempt (1-based),
// and false when err is not to be retried: when it is not retryable, or the attempts
// are spent.
func (p *RetryPolicy) delay(attempt int, err error, retryable bool) (time.Duration, bool) {
	if attempt >= p.MaxAttempts || !retryable {
		return 0, false
	}
	bound := p.MaxDelay
	if shift := attempt - 1; shift < 62 && p.BaseDelay<<shift > 0 && p.BaseDelay<<shift < bound {
		bound = p.BaseDelay << shift
	}
	wait := time.Duration(p.Rand() * float64(bound))
	var e *APIError
	if errors.As(err, &e) && e.Rate.RetryAfter > 0 {
		if e.Rate.RetryAfter > p.MaxDelay {
			return 0, false
		}
		wait = max(wait, e.Rate.RetryAfter)
	}
	return wait, true
}

// Sleep waits for d, or returns ctx's error if ctx ends first: the default of
// [RetryPolicy.Sleep], for a Sleep of yours that does more than wait.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
