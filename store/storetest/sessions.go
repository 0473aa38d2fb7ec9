package storetest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// TestSessionStore checks that an [auth.SessionStore] behaves as its documentation
// says: an ended session is reported ended, and other sessions are not; ending twice is no error; a session past its
// expiry gets no record; records still due are kept when others are forgotten;
// sessions ended concurrently are all kept; an id the stores cannot hold is
// store.ErrInvalid.
//
// newStore is called once per subtest and must return an empty store; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestSessionStore(t *testing.T, newStore func(t *testing.T) auth.SessionStore) {
	t.Helper()
	run(t, newStore, sessionRows)
}

var sessionRows = []behaviour[auth.SessionStore]{
	{"EndThenEnded",
		"A session ended with EndSession is reported ended by SessionEnded; a session never ended is not.",
		seEndThenEnded},
	{"EndTwice",
		"Ending an ended session is not an error, and it stays ended.",
		seEndTwice},
	{"PastExpiry",
		"A session whose expiry is not after now gets no record: ending it changes nothing.",
		sePastExpiry},
	{"KeepsDue",
		"A record whose expiry is after the now of a later EndSession is kept, whatever that call forgets.",
		seKeepsDue},
	{"Concurrent",
		"Sessions ended by many goroutines at once are all reported ended.",
		seConcurrent},
	{"InvalidID",
		"An empty id, one longer than store.MaxSessionID, or one that is not text (a NUL byte, invalid UTF-8) is store.ErrInvalid for both methods.",
		seInvalidID},
	{"Canceled",
		"A canceled context fails both methods.",
		seCanceled},
}

func ended(t *testing.T, s auth.SessionStore, id string) bool {
	t.Helper()
	ok, err := s.SessionEnded(t.Context(), id)
	must(t, "SessionEnded", err)
	return ok
}

func seEndThenEnded(t *testing.T, s auth.SessionStore) {
	a, b := auth.NewSessionID(), auth.NewSessionID()
	if ended(t, s, a) {
		t.Fatal("SessionEnded reports a session ended before EndSession")
	}
	must(t, "EndSession", s.EndSession(t.Context(), a, at(12*time.Hour), at(0)))
	if !ended(t, s, a) {
		t.Error("SessionEnded does not report an ended session")
	}
	if ended(t, s, b) {
		t.Error("SessionEnded reports a session that was never ended")
	}
}

func seEndTwice(t *testing.T, s auth.SessionStore) {
	id := auth.NewSessionID()
	must(t, "EndSession", s.EndSession(t.Context(), id, at(time.Hour), at(0)))
	must(t, "EndSession again", s.EndSession(t.Context(), id, at(time.Hour), at(time.Minute)))
	if !ended(t, s, id) {
		t.Error("a session ended twice is not reported ended")
	}
}

func sePastExpiry(t *testing.T, s auth.SessionStore) {
	for _, exp := range []time.Duration{-time.Hour, 0} {
		id := auth.NewSessionID()
		must(t, "EndSession", s.EndSession(t.Context(), id, at(exp), at(0)))
		if ended(t, s, id) {
			t.Errorf("a session whose expiry is %v after now was recorded", exp)
		}
	}
}

func seKeepsDue(t *testing.T, s auth.SessionStore) {
	short, long, late := auth.NewSessionID(), auth.NewSessionID(), auth.NewSessionID()
	must(t, "EndSession", s.EndSession(t.Context(), short, at(time.Hour), at(0)))
	must(t, "EndSession", s.EndSession(t.Context(), long, at(3*time.Hour), at(0)))
	// At t0+2h, short's record may go; long's may not.
	must(t, "EndSession", s.EndSession(t.Context(), late, at(4*time.Hour), at(2*time.Hour)))
	if !ended(t, s, long) || !ended(t, s, late) {
		t.Error("a record whose expiry has not passed was forgotten")
	}
}

func seConcurrent(t *testing.T, s auth.SessionStore) {
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = auth.NewSessionID()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Go(func() { errs[i] = s.EndSession(t.Context(), id, at(time.Hour), at(time.Duration(i)*time.Second)) })
	}
	wg.Wait()
	for i, id := range ids {
		must(t, "EndSession", errs[i])
		if !ended(t, s, id) {
			t.Errorf("session %d of %d ended concurrently is not reported ended", i, len(ids))
		}
	}
}

func seInvalidID(t *testing.T, s auth.SessionStore) {
	for _, id := range []string{"", strings.Repeat("s", store.MaxSessionID+1), "ses_\x00", "ses_\xff"} {
		wantErr(t, "EndSession", s.EndSession(t.Context(), id, at(time.Hour), at(0)), store.ErrInvalid)
		_, err := s.SessionEnded(t.Context(), id)
		wantErr(t, "SessionEnded", err, store.ErrInvalid)
	}
}

func seCanceled(t *testing.T, s auth.SessionStore) {
	id := auth.NewSessionID()
	if err := s.EndSession(canceled(t), id, at(time.Hour), at(0)); err == nil {
		t.Error("EndSession with a canceled context succeeded")
	}
	if _, err := s.SessionEnded(canceled(t), id); err == nil {
		t.Error("SessionEnded with a canceled context succeeded")
	}
}
