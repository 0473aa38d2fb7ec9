package multiinstance_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// TestExactBalance spends one account's balance with thousands of concurrent calls
// spread over three instances: exactly the balance's worth succeed, the rest are refused
// for credits, and the balance ends at zero with nothing lost and nothing charged twice.
func TestExactBalance(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := start(t, d, 3)
			const credits, calls = 1000, 3000
			acct, _, key := c.account(t, "open", credits)
			var ok, refused, other atomic.Int64
			var wg sync.WaitGroup
			work := make(chan int)
			for range 48 {
				wg.Go(func() {
					for i := range work {
						switch r := c.call(t, i, "/v1/hash?text=x", key); {
						case r.status == http.StatusOK:
							ok.Add(1)
						case r.status == http.StatusTooManyRequests && r.code == "credits_exhausted":
							refused.Add(1)
						default:
							other.Add(1)
							t.Errorf("call %d: %d %s %v", i, r.status, r.code, r.body)
						}
					}
				})
			}
			for i := range calls {
				work <- i
			}
			close(work)
			wg.Wait()
			if ok.Load() != credits || refused.Load() != calls-credits || other.Load() != 0 {
				t.Errorf("%d succeeded, %d refused for credits, %d other; want %d, %d, 0", ok.Load(), refused.Load(), other.Load(), credits, calls-credits)
			}
			for i := range c.instances {
				if b := c.balance(t, i, acct); b.Remaining != 0 || b.Used != credits {
					t.Errorf("instance %d sees %+v, want 0 remaining and %d used", i, b, credits)
				}
			}
		})
	}
}

// TestConcurrencyCeiling holds calls open on every instance: across all of them, never
// more than the plan's ceiling run at once.
func TestConcurrencyCeiling(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := start(t, d, 3)
			_, _, key := c.account(t, "tight", 100)
			results := make(chan response, 12)
			for i := range 12 {
				go func() { results <- c.call(t, i, "/v1/block", key) }()
			}
			// Every call is either running (it entered the handler) or refused.
			running, refused := 0, 0
			for running+refused < 12 {
				select {
				case <-c.block.entered:
					running++
				case r := <-results:
					if r.status != http.StatusTooManyRequests || r.code != "concurrency_limited" {
						t.Fatalf("a call ended before release: %d %s %v", r.status, r.code, r.body)
					}
					refused++
				}
			}
			if running != 3 || refused != 9 {
				t.Errorf("%d calls ran at once and %d were refused; want 3 and 9", running, refused)
			}
			for range running {
				c.block.release <- struct{}{}
			}
			for range running {
				if r := <-results; r.status != http.StatusOK {
					t.Errorf("a released call answered %d %s", r.status, r.code)
				}
			}
			// The slots are free again.
			go func() { results <- c.call(t, 1, "/v1/block", key) }()
			<-c.block.entered
			c.block.release <- struct{}{}
			if r := <-results; r.status != http.StatusOK {
				t.Errorf("a call after the others finished answered %d %s", r.status, r.code)
			}
		})
	}
}

// TestRotateAndRevokeAcrossInstances warms every instance's key cache, then rotates
// and revokes the key through one instance: the very next call on every other instance
// is refused.
func TestRotateAndRevokeAcrossInstances(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := start(t, d, 3)
			_, key, value := c.account(t, "open", 100)
			for i := range c.instances {
				if r := c.call(t, i, "/v1/hash?text=x", value); r.status != http.StatusOK {
					t.Fatalf("warming instance %d: %d %s", i, r.status, r.code)
				}
			}
			_, newValue, err := c.instances[0].mgr.RotateKey(t.Context(), key.ID)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(c.instances); i++ {
				if r := c.call(t, i, "/v1/hash?text=x", value); r.status != http.StatusUnauthorized {
					t.Errorf("old value on instance %d after a rotation: %d %s, want 401", i, r.status, r.code)
				}
				if r := c.call(t, i, "/v1/hash?text=x", newValue); r.status != http.StatusOK {
					t.Errorf("new value on instance %d: %d %s, want 200", i, r.status, r.code)
				}
			}
			if _, err := c.instances[0].mgr.RevokeKey(t.Context(), key.ID); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(c.instances); i++ {
				if r := c.call(t, i, "/v1/hash?text=x", newValue); r.status != http.StatusForbidden {
					t.Errorf("revoked key on instance %d: %d %s, want 403", i, r.status, r.code)
				}
				if r := c.call(t, i, "/v1/analytics", newValue); r.status != http.StatusForbidden {
					t.Errorf("revoked key's analytics on instance %d: %d %s, want 403", i, r.status, r.code)
				}
			}
		})
	}
}
