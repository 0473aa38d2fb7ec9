package multiinstance_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
)

// TestSuspendAndCloseAcrossInstances warms every instance's key cache, then suspends the
// account through one instance: the very next call on every other instance is refused
// with 403 account_suspended, and after the reactivation the next call is served. Once
// the account is closed, its key is refused as revoked on every instance; once deleted,
// after the closure's retention, as unknown.
func TestSuspendAndCloseAcrossInstances(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := start(t, d, 3)
			id, _, value := c.account(t, "open", 100)
			for i := range c.instances {
				if r := c.call(t, i, "/v1/hash?text=x", value); r.status != http.StatusOK {
					t.Fatalf("warming instance %d: %d %s", i, r.status, r.code)
				}
			}
			ctx := t.Context()
			if _, err := c.instances[0].mgr.SuspendAccount(ctx, id, "review"); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(c.instances); i++ {
				if r := c.call(t, i, "/v1/hash?text=x", value); r.status != http.StatusForbidden || r.code != "account_suspended" {
					t.Errorf("a call on instance %d after the suspension: %d %s, want 403 account_suspended", i, r.status, r.code)
				}
			}
			if _, err := c.instances[0].mgr.ReactivateAccount(ctx, id, ""); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(c.instances); i++ {
				if r := c.call(t, i, "/v1/hash?text=x", value); r.status != http.StatusOK {
					t.Errorf("a call on instance %d after the reactivation: %d %s, want 200", i, r.status, r.code)
				}
			}
			if _, err := c.instances[0].mgr.CloseAccount(ctx, id, "the customer left"); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(c.instances); i++ {
				if r := c.call(t, i, "/v1/hash?text=x", value); r.status != http.StatusForbidden || r.code != "forbidden" {
					t.Errorf("a key of the closed account on instance %d: %d %s, want 403 forbidden", i, r.status, r.code)
				}
			}
			// Deleted once the closure's retention (90 days) has passed.
			if err := c.instances[1].mgr.DeleteAccount(ctx, id); tollgate.CodeOf(err) != tollgate.CodeConflict {
				t.Errorf("a deletion within the retention: %v, want a conflict", err)
			}
			c.clock.Advance(90 * 24 * time.Hour)
			if err := c.instances[1].mgr.DeleteAccount(ctx, id); err != nil {
				t.Fatalf("a deletion after the retention: %v", err)
			}
			for i := range c.instances {
				if r := c.call(t, i, "/v1/hash?text=x", value); r.status != http.StatusUnauthorized {
					t.Errorf("a key of the deleted account on instance %d: %d %s, want 401", i, r.status, r.code)
				}
			}
		})
	}
}
