package postgres_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

func newSessionStore(t *testing.T) *postgres.SessionStore {
	s, err := postgres.NewSessionStore(newPool(t, 8))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSessionStoreForgets checks the table's own bound: ending a session deletes the
// rows whose expiry has passed, and keeps the others.
func TestSessionStoreForgets(t *testing.T) {
	s := newSessionStore(t)
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	old, recent := auth.NewSessionID(), auth.NewSessionID()
	if err := s.EndSession(t.Context(), old, t0.Add(time.Hour), t0); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession(t.Context(), recent, t0.Add(3*time.Hour), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.SessionEnded(t.Context(), old); err != nil || ok {
		t.Errorf("SessionEnded(past its expiry) = %v, %v; want its row deleted", ok, err)
	}
	if ok, err := s.SessionEnded(t.Context(), recent); err != nil || !ok {
		t.Errorf("SessionEnded(just ended) = %v, %v; want true", ok, err)
	}
	// Ending the same session again is one statement that must not both delete and
	// update its row.
	if err := s.EndSession(t.Context(), recent, t0.Add(3*time.Hour), t0.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
}
