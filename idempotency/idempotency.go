// Package idempotency keeps the answers of requests sent with an idempotency key, so
// that a client that retries a request (after a timeout, a dropped connection, a crash
// of its own) gets the first answer rather than a second run, on whichever instance of
// the service the retry reaches.
//
// A request with a key first claims its [Record] in a [Store]. The claim is one atomic
// step that says what to do:
//
//	Claim --> Claimed: run the request; once it has run, and before it is charged,
//	  |                MarkSettling; then Complete with the answer (or Abandon, when the
//	  |                request was refused as a whole before it ran, and may be sent again)
//	  +-----> Running: another claimant holds it, within its lease (a retry that came
//	  |                too early)
//	  +-----> Done: the answer of the first run, to send again
//	  +-----> AnswerLost: the request ran to its charge, but its claimant stopped before
//	  |                it kept the answer: it must not run again under this key
//	  +-----> Mismatch: the key was used for another request
//
// A record's life, under the token of the claimant that holds it:
//
//	(none) --Claim--> running --MarkSettling--> settling --Complete--> done
//	                   |   |                      |
//	                   |   +--Abandon--> (none)   +--lease ends--> every claim is AnswerLost
//	                   |
//	                   +--lease ends--> the next claim takes it over: running, under
//	                                    the taker's token, Run and lease
//
// and every record is forgotten at its Expires, whatever its state.
//
// A claimant that dies leaves its record running until the claim's lease ends. If it
// died before it marked the record settling, nothing of its run was charged (the
// service charges a run only after the mark), and the next claim of the same request
// takes the record over under its own [Run] id, which the service uses as the request
// id of the new run's credit reservation and concurrency slot: the new run is admitted,
// and charged, as a run of its own, whatever became of the dead run's reservation
// (voided at its expiry, and remembered so by the ledger for a while). Once marked,
// the record is never taken over: the run may have been charged, and must not run
// again. Claims of it then answer AnswerLost until it expires (see
// tollgate.IdempotencyOptions).
//
// A record never holds the client's key itself, nor any credential: it is found by an
// [ID], a hash of the account and the key, and holds the request's [Fingerprint] (a
// hash), its run id and the answer. Records are bounded: each is forgotten at its
// Expires (the retention), and the service caps the size of an answer it keeps.
//
// Stores never read the clock: the time is passed in. Implementations are in
// store/memory, store/postgres and store/redis; every implementation runs
// storetest.TestIdempotencyStore.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// ErrNotHeld is returned by [Store.MarkSettling] when the token no longer holds the
// record: another claimant took it over after the token's lease ended, or it is done,
// abandoned, past its Expires or forgotten. The record is left as it is; the caller must not charge its
// run, which the new holder may run and charge again.
var ErrNotHeld = errors.New("idempotency: the record is no longer held by this claimant")

// An ID identifies a record: the SHA-256 of the account and the client's idempotency
// key (see [NewID]). Keys are scoped to their account: two accounts that pick the same
// key have different records.
type ID [32]byte

// NewID returns the ID of the record of an account's idempotency key.
func NewID(account, key string) ID {
	h := sha256.New()
	h.Write([]byte("tollgate idempotency\x00"))
	h.Write([]byte(account))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var id ID
	h.Sum(id[:0])
	return id
}

// String returns the ID in hexadecimal.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// A Fingerprint identifies what a request asks for (a hash of its API and parameters),
// to tell a retry of the request from another request sent with the same key.
type Fingerprint [32]byte

// A Run identifies one run of a request: chosen by each claimant, and kept by the
// record while that claimant holds it. A claimant that takes the record over after
// another's lease ended replaces it with its own, so that each run is admitted and
// charged under an id of its own.
type Run [16]byte

// A Token identifies one claimant, so that only the claimant that holds the record may
// complete or abandon it: one that took it over after another's lease ended shuts the
// first one out.
type Token [16]byte

// A Claim asks for the record of ID, for the request with Fingerprint.
type Claim struct {
	ID          ID
	Fingerprint Fingerprint
	// Run is the run id to keep if the claim creates the record or takes it over.
	Run Run
	// Token identifies the claimant.
	Token Token
	// Now is when the claim is made.
	Now time.Time
	// Lease is until when the claimant may run the request: a record still Running
	// after its lease is taken over by the next claim of the same request, unless it
	// was marked settling. It must cover the longest run, or a live run could be taken
	// over.
	Lease time.Time
	// Expires is when a record the claim creates is forgotten, whatever its state; it
	// must not be before Lease (the service sets it a grace after the lease at least,
	// so that a run marked just before its lease ended is refused, not run again under
	// a new record, for that grace). A record the claim takes over is kept until the
	// later of its own Expires and this one. A claim of a forgotten record creates a
	// new one, and a mark of it fails.
	Expires time.Time
}

// A State is what a claim found.
type State uint8

// The states.
const (
	// Claimed: the claimant holds the record (new, or taken over after the previous
	// claimant's lease ended) and runs the request under Record.Run, its own Claim.Run.
	Claimed State = iota
	// Running: another claimant holds the record and its lease has not ended.
	Running
	// Done: the request was answered; Record.Answer is the answer.
	Done
	// Mismatch: the record was made for a request with another fingerprint.
	Mismatch
	// AnswerLost: the record was marked settling, and its claimant's lease ended
	// before it kept the answer (it died, most likely). The request ran and may have
	// been charged; it must not run again under this record, which stays until its
	// Expires.
	AnswerLost
)

// A Record is the outcome of a claim.
type Record struct {
	State State
	// Run is the run id of the record (Claimed, Running, Done, AnswerLost).
	Run Run
	// Answer is the answer kept by Complete (Done only).
	Answer []byte
}

// A Store keeps the records. Implementations must be safe for concurrent use and share
// state across every instance that uses the same store. Errors other than those
// documented mean the store is unavailable. Every implementation should pass
// storetest.TestIdempotencyStore.
//
// A token holds a record while the record is running (marked settling or not) under
// that token: from the claim that gave it the token until Complete or Abandon, a
// takeover by another claim, or the record's Expires.
type Store interface {
	// Claim performs c in one atomic step:
	//   - no record of c.ID, or one past its Expires: create it, running under c's
	//     Token, Run, Lease, Expires and Fingerprint, not marked, and return Claimed
	//     with c.Run;
	//   - a record with another fingerprint: return Mismatch;
	//   - a done record: return Done with its answer;
	//   - a running record whose lease has not ended at c.Now (marked or not): return
	//     Running with its Run;
	//   - a running record whose lease has ended, marked settling: return AnswerLost
	//     with its Run, and change nothing;
	//   - a running record whose lease has ended, not marked: give it c's Token, Run
	//     and Lease, and c's Expires if that is later than its own (its fingerprint
	//     stays), and return Claimed with c.Run.
	// Of concurrent claims of one ID, at most one is Claimed.
	Claim(ctx context.Context, c Claim) (Record, error)
	// Preview returns the Record that Claim(ctx, c) would return at c.Now, and changes
	// nothing: no record is made, taken over or dropped to make room. Its State is
	// Claimed where a claim would claim (no record, one past its Expires, or a running
	// one whose lease has ended, not marked), with the Run it would run under. It is
	// for a request that will not run whatever the record says (a batch none of whose
	// items is valid), whose key must still not be one used for another request; see
	// [Stored.Preview], which decides it from what the store holds.
	Preview(ctx context.Context, c Claim) (Record, error)
	// MarkSettling marks the record of id, if token holds it at now, as settling: its
	// run has ended and is about to be charged, so that once its lease ends it is never
	// taken over (claims answer AnswerLost). It is atomic with Claim, whatever the
	// lease: a takeover either comes first, and the mark returns ErrNotHeld, or finds
	// the mark. Marking a record twice is not an error. If token does not hold the
	// record, or the record is past its Expires at now (a claim would replace it, under
	// a new run id), it changes nothing and returns ErrNotHeld.
	MarkSettling(ctx context.Context, id ID, token Token, now time.Time) error
	// Complete keeps answer as the answer of the record of id, which becomes done, if
	// token still holds it (marked settling or not); otherwise it changes nothing and
	// is not an error (the record was taken over, or has expired). The record keeps its
	// Expires.
	Complete(ctx context.Context, id ID, token Token, answer []byte) error
	// Abandon forgets the record of id if token still holds it and it is not marked
	// settling, so that the request may be sent again with the same key (it is for a
	// request refused as a whole, before it ran); otherwise it changes nothing and is
	// not an error: a marked record stays, since its run may have been charged.
	Abandon(ctx context.Context, id ID, token Token) error
}

// Stored is what a store holds of a record, for [Stored.Preview].
type Stored struct {
	Fingerprint Fingerprint
	Run         Run
	// Done and Settling report a record completed, or marked settling.
	Done, Settling bool
	// Lease and Expires are the record's, in Unix nanoseconds.
	Lease, Expires int64
	// Answer is the answer of a done record.
	Answer []byte
}

// Preview returns the Record that a claim c of the record s would get (s nil for no
// record), without changing anything: the decision of [Store.Claim], for the stores'
// [Store.Preview].
func (s *Stored) Preview(c Claim) Record {
	now := c.Now.UnixNano()
	switch {
	case s == nil || s.Expires <= now:
		return Record{State: Claimed, Run: c.Run}
	case s.Fingerprint != c.Fingerprint:
		return Record{State: Mismatch}
	case s.Done:
		return Record{State: Done, Run: s.Run, Answer: s.Answer}
	case s.Lease > now:
		return Record{State: Running, Run: s.Run}
	case s.Settling:
		return Record{State: AnswerLost, Run: s.Run}
	}
	return Record{State: Claimed, Run: s.Run}
}
