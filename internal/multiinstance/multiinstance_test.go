package multiinstance_test

import (
	"context"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestExactBalance spends one account's balance with thousands of concurrent calls
// spread over three instances: exactly the balance's worth succeed, the rest are refused
// for credits, and the balance ends at zero with nothing lost and nothing charged twice.
// Where the credits are in PostgreSQL, the ledger's rows say so too (checkLedger). It
// runs on every deployment, and once more through PgBouncer in pgx's simple protocol
// (the arguments quoted into the statements' text), the other exec mode that needs
// no prepared statement.
func TestExactBalance(t *testing.T) {
	for _, d := range append(deployments(), onPostgres(throughPgBouncerSimple)) {
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
			if d.pg != nil {
				checkLedger(t, d.pg(t), acct, credits)
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

// checkLedger checks the PostgreSQL rows of an account opened with calls credits that
// calls paid calls of one credit each have spent: one 'open' entry of the credits, one
// 'reserve' entry of -1 per call, each ended by one 'settle' entry that keeps it (0),
// and no other entry (no refund, void or expiry); no reservation left open; and the
// shards hold zero, none below it.
func checkLedger(t *testing.T, pg pgTarget, account string, calls int) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ledger := pgx.Identifier{pg.schema, "tollgate_ledger"}.Sanitize()
	rows, err := conn.Query(ctx, `SELECT kind, count(*), sum(amount)::bigint FROM `+ledger+
		` WHERE account_id = $1 GROUP BY kind ORDER BY kind`, account)
	if err != nil {
		t.Fatal(err)
	}
	type total struct{ n, sum int64 }
	kinds := map[string]total{}
	for rows.Next() {
		var kind string
		var k total
		if err := rows.Scan(&kind, &k.n, &k.sum); err != nil {
			t.Fatal(err)
		}
		kinds[kind] = k
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	n := int64(calls)
	want := map[string]total{"open": {1, n}, "reserve": {n, -n}, "settle": {n, 0}}
	if !maps.Equal(kinds, want) {
		t.Errorf("ledger entries by kind (count, sum): %v; want %v", kinds, want)
	}
	var unsettled, open, shards, lowest int64
	if err := conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM `+ledger+` r WHERE r.account_id = $1 AND r.kind = 'reserve' AND NOT EXISTS (
			SELECT FROM `+ledger+` s WHERE s.account_id = $1 AND s.request_id = r.request_id AND s.kind = 'settle')),
		(SELECT count(*) FROM `+pgx.Identifier{pg.schema, "tollgate_reservations"}.Sanitize()+` WHERE account_id = $1),
		(SELECT coalesce(sum(balance), 0)::bigint FROM `+pgx.Identifier{pg.schema, "tollgate_balance_shards"}.Sanitize()+` WHERE account_id = $1),
		(SELECT coalesce(min(balance), 0)::bigint FROM `+pgx.Identifier{pg.schema, "tollgate_balance_shards"}.Sanitize()+` WHERE account_id = $1)`,
		account).Scan(&unsettled, &open, &shards, &lowest); err != nil {
		t.Fatal(err)
	}
	if unsettled != 0 || open != 0 || shards != 0 || lowest != 0 {
		t.Errorf("%d reserve entries without a settlement, %d reservations open, shards holding %d (the lowest %d); want all 0",
			unsettled, open, shards, lowest)
	}
}

// TestRevokedKeyWhileRateLimited revokes a key that another instance holds in its cache
// while the account's rate limit is spent: that instance answers its next call as a
// revoked key's (403), as every deployment does, and not with the account's rate or
// credits, which the key's holder may no longer see. With limits in Redis and keys in
// PostgreSQL the limits are judged before the key.
func TestRevokedKeyWhileRateLimited(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := start(t, d, 2)
			_, key, value := c.account(t, "slow", 100)
			if r := c.call(t, 1, "/v1/hash?text=x", value); r.status != http.StatusOK {
				t.Fatalf("warming instance 1: %d %s", r.status, r.code)
			}
			if r := c.call(t, 1, "/v1/hash?text=x", value); r.status != http.StatusTooManyRequests {
				t.Fatalf("a second call within the minute: %d %s, want 429", r.status, r.code)
			}
			if _, err := c.instances[0].mgr.RevokeKey(t.Context(), key.ID); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				r := c.call(t, 1, "/v1/hash?text=x", value)
				if r.status != http.StatusForbidden {
					t.Errorf("the revoked key, its account rate limited: %d %s, want 403", r.status, r.code)
				}
				for _, h := range []string{"X-Credits-Remaining", "X-RateLimit-Remaining", "Retry-After"} {
					if v := r.header.Get(h); v != "" {
						t.Errorf("the revoked key's refusal carries %s: %s", h, v)
					}
				}
			}
		})
	}
}
