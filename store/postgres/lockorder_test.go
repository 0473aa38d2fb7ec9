package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// lockTest returns a pool on a fresh schema, a Store on it with account "a" (100
// credits), and a function that reserves 10 of them, made at now and expiring at expires.
func lockTest(t *testing.T) (*pgxpool.Pool, *postgres.Store, func(now, expires time.Time) driver.RequestID) {
	t.Helper()
	pool := newPool(t, 8)
	s, err := postgres.New(pool, nil)
	must(t, err)
	must(t, s.Open(t.Context(), driver.Opening{Account: "a", Balance: 100, Allowance: 100, Period: period}))
	return pool, s, func(now, expires time.Time) driver.RequestID {
		req := newRequest()
		_, err := s.Reserve(t.Context(), driver.Reservation{Account: "a", Request: req, APIs: []string{"hash"}, Amount: 10,
			Period: period, Allowance: 100, Now: now, Expires: expires})
		must(t, err)
		return req
	}
}

// settleLater settles req of account "a" at at, giving back refund credits (and
// uncounting "hash" with them), on a goroutine, and returns its outcome's channel.
func settleLater(s *postgres.Store, req driver.RequestID, refund int64, at time.Time) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := s.Settle(context.Background(), driver.Settlement{Account: "a", Request: req, Refund: refund,
			Uncount: []string{"hash"}[:min(refund, 1)], Period: period, Allowance: 100, Now: at})
		done <- err
	}()
	return done
}

// wantBack checks that account "a" has its 100 credits back, none used.
func wantBack(t *testing.T, s *postgres.Store) {
	t.Helper()
	b, err := s.Balance(t.Context(), "a", t0.Add(time.Hour), period, 100)
	must(t, err)
	if b.Remaining != 100 || b.Used != 0 {
		t.Errorf("balance %d remaining, %d used; want 100 and 0 (refunded or voided, once)", b.Remaining, b.Used)
	}
}

// waiting returns the number of the pool's sessions that wait for a lock.
func waiting(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls until n of the pool's sessions wait for a lock.
func waitFor(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for waiting(t, pool) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions never waited for a lock", n)
		}
		time.Sleep(5 * time.Millisecond) // polling the server, not timing the test
	}
}

// TestSettlementsOfOneReservationLockInOrder runs two settlements of one reservation at
// once, in the interleaving that a lock order broken by one of them turns into a
// deadlock: the first, made after the expiry, voids it (the account's balance row,
// then its shards, then the reservation rows, SKIP LOCKED); the second, made before the
// expiry with a refund, closes the reservation's row and credits its shard. A
// transaction of the test holds the shard, so that both queue for it, the voiding one
// first. Whatever the order, each must end without an error or with driver.ErrVoided,
// and the reservation must end once.
func TestSettlementsOfOneReservationLockInOrder(t *testing.T) {
	pool, s, reserve := lockTest(t)
	ctx := t.Context()
	req := reserve(t0, t0.Add(time.Minute))

	gate, err := pool.Begin(ctx)
	must(t, err)
	defer gate.Rollback(context.Background())
	_, err = gate.Exec(ctx, `SELECT 1 FROM tollgate_balance_shards WHERE account_id = 'a' FOR UPDATE`)
	must(t, err)

	voiding := settleLater(s, req, 0, t0.Add(time.Minute))
	waitFor(t, pool, 1)
	refunding := settleLater(s, req, 10, t0.Add(30*time.Second))
	waitFor(t, pool, 2)
	must(t, gate.Rollback(ctx))

	for name, done := range map[string]<-chan error{"voiding": voiding, "refunding": refunding} {
		if err := <-done; err != nil && !errors.Is(err, driver.ErrVoided) {
			t.Errorf("the %s settlement: %v", name, err)
		}
	}
	wantBack(t, s)
}

// TestSettlementAtExpiryAfterAnotherRollsBack checks that a settlement made at its
// reservation's expiry finds it voided even when another settlement of the same
// reservation, made before the expiry, held its row when the void ran (a void skips
// the rows others hold) and then rolled back.
func TestSettlementAtExpiryAfterAnotherRollsBack(t *testing.T) {
	pool, s, reserve := lockTest(t)
	ctx := t.Context()
	req := reserve(t0, t0.Add(time.Minute))

	// The other settlement, in a transaction of the test's, which holds its row.
	other, err := pool.Begin(ctx)
	must(t, err)
	defer other.Rollback(context.Background())
	_, err = other.Exec(ctx, `SELECT tollgate_settle('a', $1, 0, NULL, $2, $3, 100, $4)`,
		req, period.Start, period.End, t0.Add(30*time.Second).UnixNano())
	must(t, err)

	done := settleLater(s, req, 0, t0.Add(time.Minute))
	waitFor(t, pool, 1)
	must(t, other.Rollback(ctx))
	if err := <-done; !errors.Is(err, driver.ErrVoided) {
		t.Errorf("Settle at the expiry: %v, want driver.ErrVoided", err)
	}
	wantBack(t, s)
}

// TestBatchOfClosingsVoidsInOrder runs a batch of closings that took no balance lock
// (nothing in it credits, nothing was due) while an instance whose clock lags makes a
// reservation that is due at once, and a settlement made at the expiry of the batch's
// first reservation waits for its row. The batch's second settlement must not then
// void (which takes the balance row after the first's reservation row, while the
// waiting settlement holds the balance row): each ends without an error.
func TestBatchOfClosingsVoidsInOrder(t *testing.T) {
	pool, s, reserve := lockTest(t)
	ctx := t.Context()
	first, second := reserve(t0, t0.Add(time.Minute)), reserve(t0, t0.Add(time.Minute))

	gate, err := pool.Begin(ctx)
	must(t, err)
	defer gate.Rollback(context.Background())
	_, err = gate.Exec(ctx, `SELECT 1 FROM tollgate_reservations WHERE request_id = $1 FOR UPDATE`, first)
	must(t, err)

	// The batch, made at t0+30s: its first settlement waits for the gate.
	batch := make(chan error, 1)
	go func() {
		at := t0.Add(30 * time.Second).UnixNano()
		_, err := pool.Exec(context.Background(), `SELECT * FROM tollgate_close_batch('a', $1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			[]driver.RequestID{first, second}, []bool{false, false}, []string{"a", "a"}, []int64{0, 0}, []string{}, []int32{0, 0},
			[]time.Time{period.Start, period.Start}, []time.Time{period.End, period.End}, []int64{100, 100}, []int64{at, at})
		batch <- err
	}()
	waitFor(t, pool, 1)
	// An instance whose clock lags by a minute: its reservation is due at t0+10s.
	reserve(t0.Add(-50*time.Second), t0.Add(10*time.Second))
	// A settlement of the first reservation at its expiry: it takes the balance row and
	// the shards, and waits for the row.
	late := settleLater(s, first, 0, t0.Add(time.Minute))
	waitFor(t, pool, 2)
	must(t, gate.Rollback(ctx))
	if err := <-batch; err != nil {
		t.Errorf("the batch of closings: %v", err)
	}
	if err := <-late; err != nil {
		t.Errorf("the settlement at the expiry, after the batch settled the reservation: %v", err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
