package memory_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// TestIdempotencyStoreBounded checks the memory store's own bound: at most MaxRecords
// records, the oldest forgotten first to make room (a retry of it then runs again), and
// the expired ones forgotten before any live one.
func TestIdempotencyStoreBounded(t *testing.T) {
	t0 := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	s := memory.NewIdempotencyStore(&memory.IdempotencyOptions{MaxRecords: 3})
	claim := func(id idempotency.ID, now time.Time, retention time.Duration) idempotency.Record {
		t.Helper()
		c := idempotency.Claim{ID: id, Now: now, Lease: now.Add(time.Minute), Expires: now.Add(retention)}
		rand.Read(c.Run[:])
		rand.Read(c.Token[:])
		rec, err := s.Claim(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	ids := make([]idempotency.ID, 5)
	for i := range ids {
		ids[i] = idempotency.NewID("acct", string(rune('a'+i)))
	}
	for i := range 3 {
		claim(ids[i], t0, time.Hour)
	}
	claim(ids[3], t0, time.Hour) // full: the oldest (a) goes
	if rec := claim(ids[0], t0.Add(time.Second), time.Hour); rec.State != idempotency.Claimed {
		t.Errorf("a, pushed out by d, claimed again: state %d, want Claimed (a new record)", rec.State)
	}
	if rec := claim(ids[2], t0.Add(time.Second), time.Hour); rec.State != idempotency.Running {
		t.Errorf("c, kept: state %d, want Running", rec.State)
	}
	// An hour on, every record has expired: five new ones fit, the last three kept.
	later := t0.Add(2 * time.Hour)
	for _, id := range ids {
		if rec := claim(id, later, time.Hour); rec.State != idempotency.Claimed {
			t.Errorf("a claim after every record expired: state %d, want Claimed", rec.State)
		}
	}
	for i := 4; i >= 0; i-- {
		want := idempotency.Running
		if i < 2 {
			want = idempotency.Claimed // pushed out by the last three
		}
		if rec := claim(ids[i], later.Add(time.Second), time.Hour); rec.State != want {
			t.Errorf("record %d: state %d, want %d", i, rec.State, want)
		}
	}
}

// TestIdempotencyStoreBytesBounded checks the bound on the answers' bytes: an answer
// that takes the store past MaxBytes pushes the oldest records out, and the store never
// holds more.
func TestIdempotencyStoreBytesBounded(t *testing.T) {
	t0 := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	s := memory.NewIdempotencyStore(&memory.IdempotencyOptions{MaxBytes: 1000})
	complete := func(key string, size int) {
		t.Helper()
		c := idempotency.Claim{ID: idempotency.NewID("acct", key), Now: t0, Lease: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}
		if _, err := s.Claim(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(t.Context(), c.ID, c.Token, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	state := func(key string) idempotency.State {
		t.Helper()
		c := idempotency.Claim{ID: idempotency.NewID("acct", key), Now: t0, Lease: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}
		c.Fingerprint[0] = 1 // another request: a kept record is a Mismatch, a forgotten one Claimed
		rec, err := s.Claim(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		return rec.State
	}
	complete("a", 400)
	complete("b", 400)
	complete("c", 400) // 1200 bytes: a goes
	if got := state("a"); got != idempotency.Claimed {
		t.Errorf("a after the bound was passed: state %d, want it forgotten (Claimed anew)", got)
	}
	for _, k := range []string{"b", "c"} {
		if got := state(k); got != idempotency.Mismatch {
			t.Errorf("%s: state %d, want it kept (Mismatch for another request)", k, got)
		}
	}
}
