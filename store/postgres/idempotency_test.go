package postgres_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// TestIdempotencyStoreForgets checks the table's own bound: each claim deletes records
// past their expiry, a few at a time, and keeps the others.
func TestIdempotencyStoreForgets(t *testing.T) {
	pool := newPool(t, 4)
	s, err := postgres.NewIdempotencyStore(pool)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	claim := func(now time.Time, retention time.Duration) {
		t.Helper()
		c := idempotency.Claim{Now: now, Lease: now.Add(time.Minute), Expires: now.Add(retention)}
		rand.Read(c.ID[:])
		rand.Read(c.Run[:])
		rand.Read(c.Token[:])
		if rec, err := s.Claim(t.Context(), c); err != nil || rec.State != idempotency.Claimed {
			t.Fatalf("Claim: %+v, %v", rec, err)
		}
	}
	for range 20 {
		claim(t0, time.Hour)
	}
	claim(t0, 3*time.Hour) // outlives the others
	count := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM tollgate_idempotency`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	later := t0.Add(2 * time.Hour)
	claim(later, time.Hour) // deletes 8 of the 20 expired
	if n := count(); n != 21-8+1 {
		t.Errorf("%d records after one claim past their expiry, want 14: 8 deleted", n)
	}
	for range 3 {
		claim(later, time.Hour)
	}
	if n := count(); n != 1+4 {
		t.Errorf("%d records after four claims, want 5: the live ones only", n)
	}
}
