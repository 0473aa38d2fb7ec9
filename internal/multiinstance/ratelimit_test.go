package multiinstance_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRateLimitAcrossInstances spends the "slow" plan's one call a minute on one
// instance: the next call, on another instance, is refused with 429 rate_limited and a
// Retry-After within the minute, and takes nothing (no credits, no slot). On the stores
// that admit in one step (PostgreSQL, Redis), the refusal is the step's denial. Where
// the test moves the clock, the call goes through once the minute has passed.
func TestRateLimitAcrossInstances(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := start(t, d, 2)
			acct, _, key := c.account(t, "slow", 100)
			if r := c.call(t, 0, "/v1/hash?text=x", key); r.status != http.StatusOK {
				t.Fatalf("the minute's call: %d %s %v", r.status, r.code, r.body)
			}
			r := c.call(t, 1, "/v1/hash?text=x", key)
			if r.status != http.StatusTooManyRequests || r.code != "rate_limited" {
				t.Fatalf("a second call within the minute, on another instance: %d %s %v; want 429 rate_limited", r.status, r.code, r.body)
			}
			if wait, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || wait < 1 || wait > 60 {
				t.Errorf("Retry-After %q, want 1 to 60 seconds", r.header.Get("Retry-After"))
			}
			if msg, _ := r.body["error"].(string); !strings.Contains(msg, "1 calls per minute") {
				t.Errorf("message %q does not say the plan's limit", msg)
			}
			for i := range c.instances {
				if b := c.balance(t, i, acct); b.Remaining != 99 || b.Used != 1 {
					t.Errorf("instance %d sees %+v after the refusal, want 99 remaining and 1 used", i, b)
				}
			}
			if n, err := d.stores(t).Slots.InUse(t.Context(), acct, c.clock.Now()); err != nil || n != 0 {
				t.Errorf("%d slots in use after the refusal (%v), want 0", n, err)
			}
			if d.serverClock {
				return // the store's clock: the minute cannot be moved
			}
			c.clock.Advance(time.Minute)
			if r := c.call(t, 1, "/v1/hash?text=x", key); r.status != http.StatusOK {
				t.Errorf("a minute later: %d %s %v, want 200", r.status, r.code, r.body)
			}
		})
	}
}
