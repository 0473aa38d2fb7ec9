package memory_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// TestSessionStoreForgets checks the store's own bound: ending a session forgets the
// records whose expiry has passed.
func TestSessionStoreForgets(t *testing.T) {
	s := memory.NewSessionStore()
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	old, recent := auth.NewSessionID(), auth.NewSessionID()
	if err := s.EndSession(t.Context(), old, t0.Add(time.Hour), t0); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession(t.Context(), recent, t0.Add(3*time.Hour), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.SessionEnded(t.Context(), old); ok {
		t.Error("the record of a session past its expiry is still kept")
	}
	if ok, _ := s.SessionEnded(t.Context(), recent); !ok {
		t.Error("the record of a session ended just now is gone")
	}
}
