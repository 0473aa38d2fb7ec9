package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/idempotency"
)

// TestIdempotencyStore checks that an [idempotency.Store] claims, marks, completes and
// abandons records as the interface documents: one claimant at a time, a takeover
// after the lease under the taker's own run id (and an expiry at least the taker's),
// never of a record marked settling (AnswerLost
// instead), marks only by the holder, answers kept as they were given, the fingerprint
// guarding the key, records forgotten at their expiry, concurrent claims of one key
// granting exactly one, and a mark racing takeovers deciding with them one at a time.
//
// newStore is called once per subtest and must return an empty store; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestIdempotencyStore(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	t.Helper()
	run(t, newStore, idempotencyRows)
}

var idempotencyRows = []behaviour[idempotency.Store]{
	{"ClaimNew",
		"The first claim of an id creates its record and is Claimed with the claim's run id.",
		idemClaimNew},
	{"ClaimWhileRunning",
		"A claim of a record another claimant holds, within its lease, is Running and changes nothing: the holder still completes it.",
		idemClaimWhileRunning},
	{"CompleteThenReplay",
		"After Complete, every claim of the same request is Done with the answer byte for byte, and the run id of the first claim.",
		idemCompleteThenReplay},
	{"Mismatch",
		"A claim with another fingerprint is Mismatch, whether the record is running or done, and changes nothing.",
		idemMismatch},
	{"Abandon",
		"Abandon forgets a record its token holds: the next claim is Claimed anew, with its own run id.",
		idemRelease},
	{"TakeoverAfterLease",
		"A claim after the holder's lease ended takes the record over under its own run id, which every later claim sees; the first holder can then neither mark, complete nor abandon it.",
		idemTakeover},
	{"TakeoverKeepsLaterExpiry",
		"A takeover keeps the later of the record's Expires and its own: a record taken over is kept until the taker's Expires when that is later, and is not shortened when it is earlier.",
		idemTakeoverExpiry},
	{"CompleteOnce",
		"A completed record is not completed again, nor abandoned: its first answer stays.",
		idemCompleteOnce},
	{"ForgottenAtExpiry",
		"A record is forgotten at its Expires, running or done: a claim at that instant creates a new one, with the new claim's run id and fingerprint.",
		idemForgottenAtExpiry},
	{"IDsIndependent",
		"Records of different ids do not affect each other.",
		idemIDsIndependent},
	{"LargeAnswer",
		"An answer of a mebibyte, with every byte value, is kept as it was given.",
		idemLargeAnswer},
	{"NoAliasing",
		"The store keeps no reference to the answer passed to Complete, and changing a returned answer changes nothing stored.",
		idemNoAliasing},
	{"CanceledContext",
		"Claim, Complete and Abandon given a canceled context return an error matching context.Canceled and change nothing.",
		idemCanceled},
	{"ConcurrentClaims",
		"Of many claims of one id at once, exactly one is Claimed; the others are Running.",
		idemConcurrentClaims},
	{"ConcurrentTakeovers",
		"Of many claims at once of a record whose lease has ended, exactly one takes it over, under its own run id, which the others see.",
		idemConcurrentTakeovers},
	{"MarkSettlingThenClaim",
		"A record marked settling is Running to claims within its lease, and AnswerLost with its run id after it, until its expiry: never taken over.",
		idemMarkThenClaim},
	{"MarkSettlingNotHeld",
		"MarkSettling by a token that does not hold the record (another's, one taken over, of a done, abandoned or unknown record) returns ErrNotHeld and changes nothing.",
		idemMarkNotHeld},
	{"MarkSettlingTwice",
		"Marking a record twice is not an error, and it stays marked.",
		idemMarkTwice},
	{"CompleteAfterMark",
		"The holder completes a marked record, before or after its lease ended: every claim then gets the answer.",
		idemCompleteAfterMark},
	{"AbandonAfterMark",
		"Abandon leaves a marked record as it is: Running within its lease, AnswerLost after it.",
		idemAbandonAfterMark},
	{"MarkedForgottenAtExpiry",
		"A marked record is forgotten at its Expires: a claim then creates a new one, with its own run id, not marked (taken over after its lease).",
		idemMarkedForgotten},
	{"MarkSettlingAfterExpiry",
		"MarkSettling of a record past its Expires at the time passed (its holder stalled, nobody claimed it) returns ErrNotHeld and changes nothing: a claim then creates a new record, with its own run id; a nanosecond before its Expires, the mark is taken.",
		idemMarkAfterExpiry},
	{"Preview",
		"Preview returns what a claim would get (Claimed for no record, one past its Expires or one whose lease ended unmarked; Mismatch, Done with the answer, Running, AnswerLost) and changes nothing: it makes no record, takes none over and keeps none alive.",
		idemPreview},
	{"ConcurrentClaimsAndMark",
		"A mark and many claims at once of a record whose lease has ended: either the mark comes first (every claim AnswerLost) or a takeover does (the mark ErrNotHeld, one claim Claimed, the others Running).",
		idemConcurrentClaimsAndMark},
}

// idemRequest is a request sent with an idempotency key: its record's id and its
// fingerprint.
type idemRequest struct {
	id idempotency.ID
	fp idempotency.Fingerprint
}

func newIdemRequest() idemRequest {
	var r idemRequest
	rand.Read(r.id[:])
	rand.Read(r.fp[:])
	return r
}

// The lease and the retention of the records of the checks.
const (
	idemLease     = 5 * time.Minute
	idemRetention = 24 * time.Hour
)

// claim returns a claim of r at instant now, by a new claimant with a new run id.
func (r idemRequest) claim(now time.Time) idempotency.Claim {
	c := idempotency.Claim{ID: r.id, Fingerprint: r.fp, Now: now, Lease: now.Add(idemLease), Expires: now.Add(idemRetention)}
	rand.Read(c.Run[:])
	rand.Read(c.Token[:])
	return c
}

func claim(t *testing.T, s idempotency.Store, c idempotency.Claim) idempotency.Record {
	t.Helper()
	rec, err := s.Claim(t.Context(), c)
	must(t, "Claim", err)
	return rec
}

// wantRecord checks a claim's outcome: its state, its run id (for the states that have
// one) and its answer (for Done).
func wantRecord(t *testing.T, what string, got idempotency.Record, state idempotency.State, run idempotency.Run, answer []byte) {
	t.Helper()
	if got.State != state {
		t.Errorf("%s: state %d, want %d", what, got.State, state)
		return
	}
	if state != idempotency.Mismatch && got.Run != run {
		t.Errorf("%s: run %x, want %x", what, got.Run, run)
	}
	if state == idempotency.Done && !bytes.Equal(got.Answer, answer) {
		t.Errorf("%s: answer %.80q (%d bytes), want %.80q (%d bytes)", what, got.Answer, len(got.Answer), answer, len(answer))
	}
}

func complete(t *testing.T, s idempotency.Store, c idempotency.Claim, answer []byte) {
	t.Helper()
	must(t, "Complete", s.Complete(t.Context(), c.ID, c.Token, answer))
}

// markSettling marks c's record at now.
func markSettling(t *testing.T, s idempotency.Store, c idempotency.Claim, now time.Time) {
	t.Helper()
	must(t, "MarkSettling", s.MarkSettling(t.Context(), c.ID, c.Token, now))
}

func idemClaimNew(t *testing.T, s idempotency.Store) {
	c := newIdemRequest().claim(t0)
	wantRecord(t, "first claim", claim(t, s, c), idempotency.Claimed, c.Run, nil)
}

func idemClaimWhileRunning(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	for _, d := range []time.Duration{0, time.Minute, idemLease - time.Nanosecond} {
		wantRecord(t, fmt.Sprintf("a retry %v into the lease", d), claim(t, s, r.claim(at(d))), idempotency.Running, first.Run, nil)
	}
	complete(t, s, first, []byte(`{"ok":1}`))
	wantRecord(t, "after the holder completed", claim(t, s, r.claim(at(time.Minute))), idempotency.Done, first.Run, []byte(`{"ok":1}`))
}

func idemCompleteThenReplay(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	answer := []byte(`{"items":[{"status":"ok"}],"summary":{"ok":1}}`)
	complete(t, s, first, answer)
	for i, d := range []time.Duration{time.Second, idemLease, idemRetention - time.Nanosecond} {
		wantRecord(t, fmt.Sprintf("replay %d", i), claim(t, s, r.claim(at(d))), idempotency.Done, first.Run, answer)
	}
}

func idemMismatch(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	other := r
	other.fp[0] ^= 1
	wantRecord(t, "another request while the first runs", claim(t, s, other.claim(at(time.Second))), idempotency.Mismatch, idempotency.Run{}, nil)
	wantRecord(t, "the first request again", claim(t, s, r.claim(at(time.Second))), idempotency.Running, first.Run, nil)
	complete(t, s, first, []byte("a"))
	wantRecord(t, "another request after the first is done", claim(t, s, other.claim(at(time.Minute))), idempotency.Mismatch, idempotency.Run{}, nil)
	wantRecord(t, "another request after the lease", claim(t, s, other.claim(at(idemLease+time.Second))), idempotency.Mismatch, idempotency.Run{}, nil)
	wantRecord(t, "the first request after them", claim(t, s, r.claim(at(time.Minute))), idempotency.Done, first.Run, []byte("a"))
}

func idemRelease(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	must(t, "Abandon", s.Abandon(t.Context(), first.ID, first.Token))
	again := r.claim(at(time.Second))
	wantRecord(t, "a claim after Abandon", claim(t, s, again), idempotency.Claimed, again.Run, nil)
	// The first claimant's token no longer holds it.
	must(t, "Abandon by the old token", s.Abandon(t.Context(), first.ID, first.Token))
	complete(t, s, first, []byte("stale"))
	wantRecord(t, "the new claim's record", claim(t, s, r.claim(at(2*time.Second))), idempotency.Running, again.Run, nil)
	// Releasing a record that does not exist is no error.
	must(t, "Abandon of an unknown id", s.Abandon(t.Context(), newIdemRequest().id, first.Token))
	complete(t, s, newIdemRequest().claim(t0), []byte("unknown"))
}

func idemTakeover(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	second := r.claim(at(idemLease))
	// The taker runs under its own run id: the first run's (its reservation, its slot)
	// may have been settled, voided or forgotten meanwhile.
	wantRecord(t, "a claim at the end of the lease", claim(t, s, second), idempotency.Claimed, second.Run, nil)
	wantRecord(t, "a claim within the new lease", claim(t, s, r.claim(at(idemLease+time.Minute))), idempotency.Running, second.Run, nil)
	wantErr(t, "MarkSettling by the first", s.MarkSettling(t.Context(), first.ID, first.Token, at(idemLease+time.Minute)), idempotency.ErrNotHeld)
	complete(t, s, first, []byte("from the first, taken over"))
	must(t, "Abandon by the first", s.Abandon(t.Context(), first.ID, first.Token))
	wantRecord(t, "after the first tried to mark, complete and abandon", claim(t, s, r.claim(at(idemLease+time.Minute))), idempotency.Running, second.Run, nil)
	third := r.claim(at(2 * idemLease))
	wantRecord(t, "a claim after the second's lease (not marked)", claim(t, s, third), idempotency.Claimed, third.Run, nil)
	complete(t, s, third, []byte("from the third"))
	wantRecord(t, "after the third completed", claim(t, s, r.claim(at(2*idemLease+time.Minute))), idempotency.Done, third.Run, []byte("from the third"))
}

func idemTakeoverExpiry(t *testing.T, s idempotency.Store) {
	// A record whose expiry is a minute after its lease (a short retention): taken over
	// at the end of the lease by a claim that would keep it a day.
	r := newIdemRequest()
	first := r.claim(t0)
	first.Expires = first.Lease.Add(time.Minute)
	claim(t, s, first)
	second := r.claim(at(idemLease))
	wantRecord(t, "the takeover", claim(t, s, second), idempotency.Claimed, second.Run, nil)
	past := at(idemLease + 2*time.Minute) // past the first claim's Expires, within the second's lease
	wantRecord(t, "a claim past the first claim's expiry", claim(t, s, r.claim(past)), idempotency.Running, second.Run, nil)
	markSettling(t, s, second, past)
	complete(t, s, second, []byte("kept"))
	wantRecord(t, "a claim a nanosecond before the taker's expiry", claim(t, s, r.claim(second.Expires.Add(-time.Nanosecond))), idempotency.Done, second.Run, []byte("kept"))
	fresh := r.claim(second.Expires)
	wantRecord(t, "a claim at the taker's expiry", claim(t, s, fresh), idempotency.Claimed, fresh.Run, nil)

	// A takeover whose own expiry is earlier leaves the record's.
	long := newIdemRequest()
	l := long.claim(t0)
	claim(t, s, l)
	short := long.claim(at(idemLease))
	short.Expires = short.Lease
	wantRecord(t, "a takeover with an earlier expiry", claim(t, s, short), idempotency.Claimed, short.Run, nil)
	complete(t, s, short, []byte("long"))
	wantRecord(t, "a claim past the taker's own expiry", claim(t, s, long.claim(at(2*idemLease+time.Minute))), idempotency.Done, short.Run, []byte("long"))
}

func idemCompleteOnce(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	complete(t, s, first, []byte("first"))
	complete(t, s, first, []byte("second"))
	must(t, "Abandon after Complete", s.Abandon(t.Context(), first.ID, first.Token))
	wantRecord(t, "replay", claim(t, s, r.claim(at(time.Second))), idempotency.Done, first.Run, []byte("first"))
}

func idemForgottenAtExpiry(t *testing.T, s idempotency.Store) {
	done, running := newIdemRequest(), newIdemRequest()
	d, rn := done.claim(t0), running.claim(t0)
	claim(t, s, d)
	complete(t, s, d, []byte("old"))
	claim(t, s, rn)
	wantRecord(t, "a nanosecond before the expiry", claim(t, s, done.claim(at(idemRetention-time.Nanosecond))), idempotency.Done, d.Run, []byte("old"))
	for _, r := range []idemRequest{done, running} {
		next := r
		next.fp[0] ^= 1 // another request with the same key, once the first is forgotten
		c := next.claim(at(idemRetention))
		wantRecord(t, "a claim at the expiry", claim(t, s, c), idempotency.Claimed, c.Run, nil)
		wantRecord(t, "the first request after it", claim(t, s, r.claim(at(idemRetention+time.Second))), idempotency.Mismatch, idempotency.Run{}, nil)
	}
}

func idemIDsIndependent(t *testing.T, s idempotency.Store) {
	a, b := newIdemRequest(), newIdemRequest()
	b.fp = a.fp // the same request, under two keys
	ca, cb := a.claim(t0), b.claim(t0)
	wantRecord(t, "claim of a", claim(t, s, ca), idempotency.Claimed, ca.Run, nil)
	wantRecord(t, "claim of b", claim(t, s, cb), idempotency.Claimed, cb.Run, nil)
	complete(t, s, ca, []byte("a"))
	wantRecord(t, "b after a completed", claim(t, s, b.claim(at(time.Second))), idempotency.Running, cb.Run, nil)
	must(t, "Abandon b", s.Abandon(t.Context(), cb.ID, cb.Token))
	wantRecord(t, "a after b was abandoned", claim(t, s, a.claim(at(time.Second))), idempotency.Done, ca.Run, []byte("a"))
}

func idemLargeAnswer(t *testing.T, s idempotency.Store) {
	answer := make([]byte, 1<<20)
	for i := range answer {
		answer[i] = byte(i * 7)
	}
	r := newIdemRequest()
	c := r.claim(t0)
	claim(t, s, c)
	complete(t, s, c, answer)
	wantRecord(t, "replay", claim(t, s, r.claim(at(time.Second))), idempotency.Done, c.Run, answer)
}

func idemNoAliasing(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	c := r.claim(t0)
	claim(t, s, c)
	answer := []byte("kept")
	complete(t, s, c, answer)
	answer[0] = 'X'
	got := claim(t, s, r.claim(at(time.Second)))
	wantRecord(t, "replay after the caller changed its slice", got, idempotency.Done, c.Run, []byte("kept"))
	if len(got.Answer) > 0 {
		got.Answer[0] = 'Y'
	}
	wantRecord(t, "replay after the caller changed the returned slice", claim(t, s, r.claim(at(time.Second))), idempotency.Done, c.Run, []byte("kept"))
}

func idemCanceled(t *testing.T, s idempotency.Store) {
	ctx := canceled(t)
	r := newIdemRequest()
	_, err := s.Claim(ctx, r.claim(t0))
	wantErr(t, "Claim", err, context.Canceled)
	c := r.claim(t0)
	wantRecord(t, "a claim after the canceled one", claim(t, s, c), idempotency.Claimed, c.Run, nil)
	wantErr(t, "Complete", s.Complete(ctx, c.ID, c.Token, []byte("x")), context.Canceled)
	wantErr(t, "Abandon", s.Abandon(ctx, c.ID, c.Token), context.Canceled)
	wantErr(t, "MarkSettling", s.MarkSettling(ctx, c.ID, c.Token, t0), context.Canceled)
	wantRecord(t, "the record after them", claim(t, s, r.claim(at(time.Second))), idempotency.Running, c.Run, nil)
	next := r.claim(at(idemLease))
	wantRecord(t, "a claim after the lease (the record was not marked)", claim(t, s, next), idempotency.Claimed, next.Run, nil)
}

// A claimOutcome is a claim and what it got.
type claimOutcome struct {
	claim idempotency.Claim
	rec   idempotency.Record
}

// concurrentClaims sends one claim of r at now from each of many goroutines at once
// and returns the outcomes.
func concurrentClaims(t *testing.T, s idempotency.Store, r idemRequest, now time.Time) []claimOutcome {
	var (
		mu   sync.Mutex
		outs []claimOutcome
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			c := r.claim(now)
			rec, err := s.Claim(t.Context(), c)
			if err != nil {
				t.Errorf("Claim: %v", err)
				return
			}
			mu.Lock()
			outs = append(outs, claimOutcome{c, rec})
			mu.Unlock()
		})
	}
	wg.Wait()
	return outs
}

// wantOneClaimed checks that exactly one of outs is Claimed, under its own claim's run
// id, and the others Running, with that run id (the record has one), which differs
// from old (the run id of the claimant the record was taken from, if any).
func wantOneClaimed(t *testing.T, outs []claimOutcome, old *idempotency.Run) {
	t.Helper()
	var winner *claimOutcome
	for i, o := range outs {
		switch o.rec.State {
		case idempotency.Claimed:
			if winner != nil {
				t.Errorf("two concurrent claims were Claimed")
			}
			winner = &outs[i]
		case idempotency.Running:
		default:
			t.Errorf("a concurrent claim is in state %d, want Claimed or Running", o.rec.State)
		}
	}
	if winner == nil {
		t.Fatalf("none of %d concurrent claims was Claimed, want exactly 1", len(outs))
	}
	if winner.rec.Run != winner.claim.Run || (old != nil && winner.rec.Run == *old) {
		t.Errorf("the claim that won has run %x, want its own %x (the record's before: %x)", winner.rec.Run, winner.claim.Run, old)
	}
	for _, o := range outs {
		if o.rec.Run != winner.rec.Run {
			t.Errorf("a claim saw run %x, the one that won %x: one record has one run id", o.rec.Run, winner.rec.Run)
		}
	}
}

func idemConcurrentClaims(t *testing.T, s idempotency.Store) {
	wantOneClaimed(t, concurrentClaims(t, s, newIdemRequest(), t0), nil)
}

func idemConcurrentTakeovers(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	wantOneClaimed(t, concurrentClaims(t, s, r, at(idemLease+time.Second)), &first.Run)
}

func idemMarkThenClaim(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	markSettling(t, s, first, at(time.Second))
	for _, d := range []time.Duration{0, time.Minute, idemLease - time.Nanosecond} {
		wantRecord(t, fmt.Sprintf("a claim %v into the lease", d), claim(t, s, r.claim(at(d))), idempotency.Running, first.Run, nil)
	}
	for _, d := range []time.Duration{idemLease, idemLease + time.Second, idemRetention - time.Nanosecond} {
		wantRecord(t, fmt.Sprintf("a claim %v after the claim", d), claim(t, s, r.claim(at(d))), idempotency.AnswerLost, first.Run, nil)
	}
	other := r
	other.fp[0] ^= 1
	wantRecord(t, "another request after the lease", claim(t, s, other.claim(at(idemLease))), idempotency.Mismatch, idempotency.Run{}, nil)
	// The refused claims took nothing: the holder still completes it.
	complete(t, s, first, []byte("late"))
	wantRecord(t, "after the holder completed", claim(t, s, r.claim(at(idemLease+time.Minute))), idempotency.Done, first.Run, []byte("late"))
}

func idemMarkNotHeld(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	stranger := r.claim(t0) // a token that never held it
	wantErr(t, "MarkSettling by another token", s.MarkSettling(t.Context(), first.ID, stranger.Token, t0), idempotency.ErrNotHeld)
	second := r.claim(at(idemLease))
	wantRecord(t, "a claim after the lease (not marked)", claim(t, s, second), idempotency.Claimed, second.Run, nil)
	wantErr(t, "MarkSettling by the first, taken over", s.MarkSettling(t.Context(), first.ID, first.Token, at(idemLease)), idempotency.ErrNotHeld)
	third := r.claim(at(2 * idemLease))
	wantRecord(t, "a claim after the second's lease (still not marked)", claim(t, s, third), idempotency.Claimed, third.Run, nil)

	done := newIdemRequest()
	d := done.claim(t0)
	claim(t, s, d)
	complete(t, s, d, []byte("kept"))
	wantErr(t, "MarkSettling of a done record", s.MarkSettling(t.Context(), d.ID, d.Token, at(time.Second)), idempotency.ErrNotHeld)
	wantRecord(t, "the done record after it", claim(t, s, done.claim(at(idemLease))), idempotency.Done, d.Run, []byte("kept"))

	abandoned := newIdemRequest()
	a := abandoned.claim(t0)
	claim(t, s, a)
	must(t, "Abandon", s.Abandon(t.Context(), a.ID, a.Token))
	wantErr(t, "MarkSettling of an abandoned record", s.MarkSettling(t.Context(), a.ID, a.Token, at(time.Second)), idempotency.ErrNotHeld)
	again := abandoned.claim(at(time.Second))
	wantRecord(t, "a claim after it", claim(t, s, again), idempotency.Claimed, again.Run, nil)

	unknown := newIdemRequest().claim(t0)
	wantErr(t, "MarkSettling of an unknown record", s.MarkSettling(t.Context(), unknown.ID, unknown.Token, t0), idempotency.ErrNotHeld)
	wantRecord(t, "a claim of it after", claim(t, s, unknown), idempotency.Claimed, unknown.Run, nil)
}

func idemMarkTwice(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	markSettling(t, s, first, at(time.Second))
	markSettling(t, s, first, at(2*time.Second))
	wantRecord(t, "a claim after the lease", claim(t, s, r.claim(at(idemLease))), idempotency.AnswerLost, first.Run, nil)
	// The holder's lease has ended, but nobody could take the record over: it still
	// holds it.
	markSettling(t, s, first, at(idemLease+time.Second))
}

func idemCompleteAfterMark(t *testing.T, s idempotency.Store) {
	for _, late := range []bool{false, true} {
		r := newIdemRequest()
		first := r.claim(t0)
		claim(t, s, first)
		markSettling(t, s, first, at(time.Second))
		when := at(time.Second)
		if late {
			when = at(idemLease + time.Second)
			wantRecord(t, "a claim after the lease", claim(t, s, r.claim(when)), idempotency.AnswerLost, first.Run, nil)
		}
		complete(t, s, first, []byte("answer"))
		for _, d := range []time.Duration{0, idemLease, idemLease + time.Minute} {
			wantRecord(t, fmt.Sprintf("a claim %v later (completed after the lease: %v)", d, late), claim(t, s, r.claim(when.Add(d))), idempotency.Done, first.Run, []byte("answer"))
		}
	}
}

func idemAbandonAfterMark(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	markSettling(t, s, first, at(time.Second))
	must(t, "Abandon of a marked record", s.Abandon(t.Context(), first.ID, first.Token))
	wantRecord(t, "a claim within the lease", claim(t, s, r.claim(at(time.Second))), idempotency.Running, first.Run, nil)
	wantRecord(t, "a claim after the lease", claim(t, s, r.claim(at(idemLease))), idempotency.AnswerLost, first.Run, nil)
}

func idemMarkedForgotten(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	first := r.claim(t0)
	claim(t, s, first)
	markSettling(t, s, first, at(time.Second))
	wantRecord(t, "a nanosecond before the expiry", claim(t, s, r.claim(at(idemRetention-time.Nanosecond))), idempotency.AnswerLost, first.Run, nil)
	fresh := r.claim(at(idemRetention))
	wantRecord(t, "a claim at the expiry", claim(t, s, fresh), idempotency.Claimed, fresh.Run, nil)
	wantErr(t, "MarkSettling by the first claimant", s.MarkSettling(t.Context(), first.ID, first.Token, at(idemRetention)), idempotency.ErrNotHeld)
	next := r.claim(at(idemRetention + idemLease))
	wantRecord(t, "a claim after the new record's lease", claim(t, s, next), idempotency.Claimed, next.Run, nil)
}

func idemMarkAfterExpiry(t *testing.T, s idempotency.Store) {
	// A record that expires when its lease ends (a retention shorter than the lease).
	short := func(r idemRequest, now time.Time) idempotency.Claim {
		c := r.claim(now)
		c.Expires = c.Lease
		return c
	}
	r := newIdemRequest()
	first := short(r, t0)
	claim(t, s, first)
	wantErr(t, "MarkSettling at the record's expiry", s.MarkSettling(t.Context(), first.ID, first.Token, at(idemLease)), idempotency.ErrNotHeld)
	fresh := short(r, at(idemLease))
	wantRecord(t, "a claim at the expiry (the record was not marked)", claim(t, s, fresh), idempotency.Claimed, fresh.Run, nil)
	wantErr(t, "MarkSettling by the first claimant, after the new claim", s.MarkSettling(t.Context(), first.ID, first.Token, at(idemLease+time.Second)), idempotency.ErrNotHeld)
	wantRecord(t, "a claim within the new record's lease", claim(t, s, short(r, at(idemLease+time.Second))), idempotency.Running, fresh.Run, nil)

	live := newIdemRequest()
	l := short(live, t0)
	claim(t, s, l)
	markSettling(t, s, l, at(idemLease-time.Nanosecond))
	wantRecord(t, "a claim a nanosecond before the expiry of the marked record", claim(t, s, short(live, at(idemLease-time.Nanosecond))), idempotency.Running, l.Run, nil)
	next := short(live, at(idemLease))
	wantRecord(t, "a claim at its expiry", claim(t, s, next), idempotency.Claimed, next.Run, nil)
}

func idemConcurrentClaimsAndMark(t *testing.T, s idempotency.Store) {
	marked := 0
	for range 16 {
		r := newIdemRequest()
		first := r.claim(t0)
		claim(t, s, first)
		var (
			mark error
			wg   sync.WaitGroup
		)
		wg.Go(func() { mark = s.MarkSettling(t.Context(), first.ID, first.Token, at(idemLease+time.Second)) })
		outs := concurrentClaims(t, s, r, at(idemLease+time.Second))
		wg.Wait()
		switch {
		case mark == nil:
			marked++
			for _, o := range outs {
				if o.rec.State != idempotency.AnswerLost || o.rec.Run != first.Run {
					t.Errorf("a claim racing a mark that succeeded: %+v, want AnswerLost with run %x", o.rec, first.Run)
				}
			}
		case errors.Is(mark, idempotency.ErrNotHeld):
			wantOneClaimed(t, outs, &first.Run)
		default:
			t.Errorf("MarkSettling racing claims: %v", mark)
		}
	}
	t.Logf("%d of 16 marks came before the takeovers", marked)
}

func preview(t *testing.T, s idempotency.Store, c idempotency.Claim) idempotency.Record {
	t.Helper()
	rec, err := s.Preview(t.Context(), c)
	must(t, "Preview", err)
	return rec
}

func idemPreview(t *testing.T, s idempotency.Store) {
	r := newIdemRequest()
	other := r
	other.fp[0] ^= 1
	// No record: a claim would claim it, under its own run id; the preview makes none.
	p := r.claim(t0)
	wantRecord(t, "a preview of no record", preview(t, s, p), idempotency.Claimed, p.Run, nil)
	first := r.claim(at(time.Second))
	wantRecord(t, "the claim after the preview", claim(t, s, first), idempotency.Claimed, first.Run, nil)
	// Running, and another request's preview.
	wantRecord(t, "a preview within the lease", preview(t, s, r.claim(at(time.Minute))), idempotency.Running, first.Run, nil)
	wantRecord(t, "another request's preview", preview(t, s, other.claim(at(time.Minute))), idempotency.Mismatch, idempotency.Run{}, nil)
	// After the lease, unmarked: a claim would take it over; the preview does not.
	late := at(time.Second + idemLease)
	wantRecord(t, "a preview after the lease", preview(t, s, r.claim(late)), idempotency.Claimed, first.Run, nil)
	markSettling(t, s, first, late) // still the first claimant's: nobody took it over
	wantRecord(t, "a preview of the marked record after its lease", preview(t, s, r.claim(late)), idempotency.AnswerLost, first.Run, nil)
	complete(t, s, first, []byte("answer"))
	wantRecord(t, "a preview of the done record", preview(t, s, r.claim(late)), idempotency.Done, first.Run, []byte("answer"))
	wantRecord(t, "another request's preview of the done record", preview(t, s, other.claim(late)), idempotency.Mismatch, idempotency.Run{}, nil)
	// At its Expires the record is as good as gone.
	expired := r.claim(at(time.Second + idemRetention))
	wantRecord(t, "a preview at the record's Expires", preview(t, s, expired), idempotency.Claimed, expired.Run, nil)
	// Previews of many ids make no records: each id is still free to claim.
	for range 3 {
		n := newIdemRequest()
		preview(t, s, n.claim(t0))
		c := n.claim(at(time.Second))
		wantRecord(t, "a claim of a previewed id", claim(t, s, c), idempotency.Claimed, c.Run, nil)
	}
	_, err := s.Preview(canceled(t), r.claim(t0))
	wantErr(t, "Preview with a canceled context", err, context.Canceled)
}
