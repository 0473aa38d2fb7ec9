package memory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/idempotency"
)

// IdempotencyStore is the in-memory [idempotency.Store], for one process. A record past
// its expiry is dropped at the next claim. The store is bounded, for every account
// together: it holds at most [IdempotencyOptions.MaxRecords] records and
// [IdempotencyOptions.MaxBytes] bytes of answers, and past either bound it drops the
// oldest records first. A retry of a request whose record was dropped is not recognised:
// it runs, and is charged, again, as a replay older than the memory ledger's window is
// (see [LedgerOptions.Remember]). Size the bounds above what the accounts send with keys
// in one retention. Use [NewIdempotencyStore] to make one.
type IdempotencyStore struct {
	mu       sync.Mutex
	records  map[idempotency.ID]*idemRecord
	order    []idemEntry // the records in the order they were made, oldest first
	seq      uint64
	max      int
	maxBytes int
	bytes    int // the answers' bytes held
}

// An idemEntry is a record in the order of making: an entry whose record has gone, or
// has been made again since (another seq), is skipped when it comes first.
type idemEntry struct {
	id  idempotency.ID
	seq uint64
}

// IdempotencyOptions configures an [IdempotencyStore]. The zero value is the default.
type IdempotencyOptions struct {
	// MaxRecords is the most records kept. The default is 100000.
	MaxRecords int
	// MaxBytes is the most bytes of answers kept. The default is 256 MiB.
	MaxBytes int
}

type idemRecord struct {
	seq         uint64
	fingerprint idempotency.Fingerprint
	run         idempotency.Run
	token       idempotency.Token
	done        bool
	settling    bool  // marked by MarkSettling
	lease       int64 // Unix nanoseconds
	expires     int64 // Unix nanoseconds
	answer      []byte
}

// Interface guard.
var _ idempotency.Store = (*IdempotencyStore)(nil)

// NewIdempotencyStore returns an empty IdempotencyStore. opts may be nil.
func NewIdempotencyStore(opts *IdempotencyOptions) *IdempotencyStore {
	s := &IdempotencyStore{records: make(map[idempotency.ID]*idemRecord), max: 100_000, maxBytes: 256 << 20}
	if opts != nil && opts.MaxRecords > 0 {
		s.max = opts.MaxRecords
	}
	if opts != nil && opts.MaxBytes > 0 {
		s.maxBytes = opts.MaxBytes
	}
	return s
}

// Claim claims the record of c.ID (see [idempotency.Store]).
func (s *IdempotencyStore) Claim(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	if err := ctx.Err(); err != nil {
		return idempotency.Record{}, err
	}
	now := c.Now.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trim(now)
	r, ok := s.records[c.ID]
	switch {
	case !ok || r.expires <= now:
		if ok {
			s.forget(c.ID)
		}
		for len(s.records) >= s.max {
			if !s.dropOldest() {
				break
			}
		}
		s.seq++
		s.records[c.ID] = &idemRecord{seq: s.seq, fingerprint: c.Fingerprint, run: c.Run, token: c.Token,
			lease: c.Lease.UnixNano(), expires: c.Expires.UnixNano()}
		s.order = append(s.order, idemEntry{c.ID, s.seq})
		return idempotency.Record{State: idempotency.Claimed, Run: c.Run}, nil
	case r.fingerprint != c.Fingerprint:
		return idempotency.Record{State: idempotency.Mismatch}, nil
	case r.done:
		return idempotency.Record{State: idempotency.Done, Run: r.run, Answer: slices.Clone(r.answer)}, nil
	case r.lease > now:
		return idempotency.Record{State: idempotency.Running, Run: r.run}, nil
	case r.settling:
		return idempotency.Record{State: idempotency.AnswerLost, Run: r.run}, nil
	}
	r.token, r.run, r.lease = c.Token, c.Run, c.Lease.UnixNano()
	r.expires = max(r.expires, c.Expires.UnixNano())
	return idempotency.Record{State: idempotency.Claimed, Run: c.Run}, nil
}

// Preview returns what a claim c would get, changing nothing (see [idempotency.Store]).
func (s *IdempotencyStore) Preview(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	if err := ctx.Err(); err != nil {
		return idempotency.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[c.ID]
	if !ok {
		return (*idempotency.Stored)(nil).Preview(c), nil
	}
	return (&idempotency.Stored{Fingerprint: r.fingerprint, Run: r.run, Done: r.done, Settling: r.settling,
		Lease: r.lease, Expires: r.expires, Answer: slices.Clone(r.answer)}).Preview(c), nil
}

// trim forgets the oldest records while they are past their expiry, and skips the
// entries of records that are gone. (A record made later than a live one but expiring
// sooner waits for it, and is judged by its own expiry when it is claimed.)
func (s *IdempotencyStore) trim(now int64) {
	n := 0
	for _, e := range s.order {
		r, ok := s.records[e.id]
		if ok && r.seq == e.seq {
			if r.expires > now {
				break
			}
			s.forget(e.id)
		}
		n++
	}
	s.order = s.order[n:]
}

// dropOldest forgets the oldest record, to make room, and reports whether there was
// one.
func (s *IdempotencyStore) dropOldest() bool {
	for len(s.order) > 0 {
		e := s.order[0]
		s.order = s.order[1:]
		if r, ok := s.records[e.id]; ok && r.seq == e.seq {
			s.forget(e.id)
			return true
		}
	}
	return false
}

// forget deletes the record of id, and counts its answer's bytes out. (Its entry in the
// order is skipped when it comes first.)
func (s *IdempotencyStore) forget(id idempotency.ID) {
	if r, ok := s.records[id]; ok {
		s.bytes -= len(r.answer)
		delete(s.records, id)
	}
}

// MarkSettling marks a record its token holds, and that has not expired at now, as
// settling.
func (s *IdempotencyStore) MarkSettling(ctx context.Context, id idempotency.ID, token idempotency.Token, now time.Time) error {
	live := false
	held, err := s.withHeld(ctx, id, token, func(r *idemRecord) {
		if live = r.expires > now.UnixNano(); live {
			r.settling = true
		}
	})
	if err == nil && (!held || !live) {
		err = idempotency.ErrNotHeld
	}
	return err
}

// Complete keeps the answer of a record its token holds.
func (s *IdempotencyStore) Complete(ctx context.Context, id idempotency.ID, token idempotency.Token, answer []byte) error {
	_, err := s.withHeld(ctx, id, token, func(r *idemRecord) {
		r.done, r.answer = true, slices.Clone(answer)
		s.bytes += len(answer)
		// Room for the answer: the oldest records go first, this one last.
		for s.bytes > s.maxBytes {
			if !s.dropOldest() {
				break
			}
		}
	})
	return err
}

// Abandon forgets a record its token holds, unless it is marked settling.
func (s *IdempotencyStore) Abandon(ctx context.Context, id idempotency.ID, token idempotency.Token) error {
	_, err := s.withHeld(ctx, id, token, func(r *idemRecord) {
		if !r.settling {
			s.forget(id)
		}
	})
	return err
}

// withHeld calls f, under the store's lock, with the record of id if token holds it
// (running under token), and reports whether it did.
func (s *IdempotencyStore) withHeld(ctx context.Context, id idempotency.ID, token idempotency.Token, f func(*idemRecord)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok || r.done || r.token != token {
		return false, nil
	}
	f(r)
	return true, nil
}
