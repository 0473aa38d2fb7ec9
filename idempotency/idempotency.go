// Package idempotency keeps the answers of requests sent with an idempotency key, so
// that a client that retries a request (after a timeout, a dropped connection, a crash
// of its own) gets the first answer rather than a second run, on whichever instance of
// the service the retry reaches.
//
// A request with a key first claims its [Record] in a [Store]. The claim is one atomic
// step that says what to do:
//
//	Claim --> Claimed: run the request, then Complete with the answer (or Abandon
//	  |                when the request was refused as a whole and may be sent again)
//	  +-----> Running: another claimant runs it now (a retry that came too early)
//	  +-----> Done: the answer of the first run, to send again
//	  +-----> Mismatch: the key was used for another request
//
// A claimant that dies leaves its record Running until the claim's lease ends; the next
// claim of the same request then takes it over, with the same [Run] id. The service uses
// that id as the request id of the run's credit reservation, so that the ledger charges
// a run taken over after a crash at most once (see tollgate.Service.CallBatch).
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
	"time"
)

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

// A Run identifies the run of a request: chosen by its first claimant and kept by the
// record, so that a claimant that takes over the record after a crash runs it under the
// same id.
type Run [16]byte

// A Token identifies one claimant, so that only the claimant that holds the record may
// complete or abandon it: one that took it over after another's lease ended shuts the
// first one out.
type Token [16]byte

// A Claim asks for the record of ID, for the request with Fingerprint.
type Claim struct {
	ID          ID
	Fingerprint Fingerprint
	// Run is the run id to keep if the claim creates the record.
	Run Run
	// Token identifies the claimant.
	Token Token
	// Now is when the claim is made.
	Now time.Time
	// Lease is until when the claimant may run the request: a record still Running
	// after its lease is taken over by the next claim of the same request. It must
	// cover the longest run, or a live run could be taken over.
	Lease time.Time
	// Expires is when a record the claim creates is forgotten, whatever its state; it
	// must not be before Lease. A claim of a forgotten record creates a new one.
	Expires time.Time
}

// A State is what a claim found.
type State uint8

// The states.
const (
	// Claimed: the claimant holds the record (new, or taken over after the previous
	// claimant's lease ended) and runs the request under Record.Run.
	Claimed State = iota
	// Running: another claimant holds the record and its lease has not ended.
	Running
	// Done: the request was answered; Record.Answer is the answer.
	Done
	// Mismatch: the record was made for a request with another fingerprint.
	Mismatch
)

// A Record is the outcome of a claim.
type Record struct {
	State State
	// Run is the run id of the record (Claimed, Running, Done).
	Run Run
	// Answer is the answer kept by Complete (Done only).
	Answer []byte
}

// A Store keeps the records. Implementations must be safe for concurrent use and share
// state across every instance that uses the same store. Errors other than those
// documented mean the store is unavailable. Every implementation should pass
// storetest.TestIdempotencyStore.
type Store interface {
	// Claim performs c in one atomic step:
	//   - no record of c.ID, or one past its Expires: create it, Running under c's
	//     Token, Run, Lease, Expires and Fingerprint, and return Claimed with c.Run;
	//   - a record with another fingerprint: return Mismatch;
	//   - a Done record: return Done with its answer;
	//   - a Running record whose lease has not ended at c.Now: return Running;
	//   - a Running record whose lease has ended: give it c's Token and Lease (its
	//     Run and Expires stay), and return Claimed with its Run.
	// Of concurrent claims of one ID, at most one is Claimed.
	Claim(ctx context.Context, c Claim) (Record, error)
	// Complete keeps answer as the answer of the record of id, which becomes Done, if
	// token still holds it (Running under token); otherwise it changes nothing and is
	// not an error (the record was taken over, or has expired). The record keeps its
	// Expires.
	Complete(ctx context.Context, id ID, token Token, answer []byte) error
	// Abandon forgets the record of id if token still holds it (Running under token),
	// so that the request may be sent again with the same key; otherwise it changes
	// nothing and is not an error.
	Abandon(ctx context.Context, id ID, token Token) error
}
