package multiinstance_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestCrashedHolderSlotReturns takes every concurrency slot of an account through the
// store, as an instance does that then crashes before releasing them: other instances
// are refused until the leases end, then served.
func TestCrashedHolderSlotReturns(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := start(t, d, 2)
			acct, _, key := c.account(t, "tight", 100)
			slots := d.stores(t).Slots
			lease := time.Minute
			if d.serverClock {
				lease = time.Second // the store's own clock: wait it out for real
			}
			// On the store's own clock, a lease may run out before the call arrives on a
			// loaded machine: a 200 after a whole lease has passed proves nothing, and
			// the round is tried again with a lease four times longer.
			for {
				start := time.Now()
				for range 3 { // the tight plan's ceiling
					var holder billing.RequestID
					rand.Read(holder[:])
					got, err := slots.Acquire(t.Context(), acct, holder, 3, lease, c.clock.Now())
					if err != nil || !got.Acquired {
						t.Fatalf("the crashed instance's Acquire: %+v, %v", got, err)
					}
				}
				r := c.call(t, 1, "/v1/hash?text=x", key)
				if r.status == http.StatusTooManyRequests && r.code == "concurrency_limited" {
					break
				}
				if !d.serverClock || time.Since(start) < lease || lease >= time.Minute {
					t.Fatalf("with every slot held by a crashed instance: %d %s, want 429 concurrency_limited", r.status, r.code)
				}
				t.Logf("the leases ran out before the call (%v); again with longer leases", time.Since(start))
				lease *= 4
			}
			if d.serverClock {
				ctx, cancel := context.WithTimeout(t.Context(), lease+10*time.Second)
				defer cancel()
				err := testenv.Wait(ctx, func() error {
					if r := c.call(t, 1, "/v1/hash?text=x", key); r.status != http.StatusOK {
						return &statusError{r}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("the slots did not come back after their lease: %v", err)
				}
				return
			}
			c.clock.Advance(lease + time.Second)
			if r := c.call(t, 0, "/v1/hash?text=x", key); r.status != http.StatusOK {
				t.Errorf("after the lease: %d %s, want 200", r.status, r.code)
			}
		})
	}
}

type statusError struct{ r response }

func (e *statusError) Error() string { return http.StatusText(e.r.status) + " " + e.r.code }
