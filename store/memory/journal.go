package memory

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/journal"
)

// Interface guards.
var (
	_ journal.KeyStore = (*KeyStore)(nil)
	_ journal.Ledger   = (*Ledger)(nil)
)

// maxJournal is the most entries a memory journal keeps: past it, a change is made
// without its entry (it is still published by the instance that made it, as without a
// journal). A memory journal ends with its process, so it holds only the changes whose
// observers deferred them, until its relay publishes them again.
const maxJournal = 1 << 16

// A changeJournal is the journal of changes (journal.Store) that a KeyStore or a Ledger
// keeps: its entries by ID, each with the end of its claim. A write records the entry
// its context carries (journal.From) while it holds the lock under which it makes the
// change, so that no reader sees the change without its entry; the journal's own lock
// is taken inside the store's, and alone by Claim and Remove.
type changeJournal struct {
	mu      sync.Mutex
	entries map[string]*journalEntry
}

type journalEntry struct {
	e       journal.Entry
	claimed time.Time // the end of its claim; zero for none
}

// record keeps e, unless it is nil, the journal has an entry with its ID, or it is
// full. The caller holds the lock of the change e records, which succeeded.
func (j *changeJournal) record(e *journal.Entry) {
	if e == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.entries[e.ID]; ok || len(j.entries) >= maxJournal {
		return
	}
	if j.entries == nil {
		j.entries = make(map[string]*journalEntry)
	}
	j.entries[e.ID] = &journalEntry{e: journal.Entry{ID: e.ID, At: e.At.UTC(), Change: slices.Clone(e.Change)}}
}

// recordIf records e if *err is nil: deferred by a write, after the deferred release of
// its lock, so that it runs while the write still holds it.
func (j *changeJournal) recordIf(e *journal.Entry, err *error) {
	if *err == nil {
		j.record(e)
	}
}

// claim is journal.Store.Claim.
func (j *changeJournal) claim(ctx context.Context, before, now time.Time, lease time.Duration, limit int) ([]journal.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := journal.CheckClaim(lease, limit); err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var free []*journalEntry
	for _, je := range j.entries {
		if je.e.At.Before(before) && !je.claimed.After(now) {
			free = append(free, je)
		}
	}
	slices.SortFunc(free, func(a, b *journalEntry) int {
		return cmp.Or(a.e.At.Compare(b.e.At), cmp.Compare(a.e.ID, b.e.ID))
	})
	out := make([]journal.Entry, 0, min(len(free), limit))
	for _, je := range free[:min(len(free), limit)] {
		je.claimed = now.Add(lease)
		out = append(out, journal.Entry{ID: je.e.ID, At: je.e.At, Change: slices.Clone(je.e.Change)})
	}
	return out, nil
}

// remove is journal.Store.Remove.
func (j *changeJournal) remove(ctx context.Context, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range ids {
		delete(j.entries, id)
	}
	return nil
}

// Claim holds and returns the entries of the key store's journal that a relay may
// publish (see [journal.Store]).
func (s *KeyStore) Claim(ctx context.Context, before, now time.Time, lease time.Duration, limit int) ([]journal.Entry, error) {
	return s.journal.claim(ctx, before, now, lease, limit)
}

// Remove deletes entries of the key store's journal (see [journal.Store]).
func (s *KeyStore) Remove(ctx context.Context, ids ...string) error {
	return s.journal.remove(ctx, ids)
}

// Claim holds and returns the entries of the ledger's journal that a relay may publish
// (see [journal.Store]).
func (l *Ledger) Claim(ctx context.Context, before, now time.Time, lease time.Duration, limit int) ([]journal.Entry, error) {
	return l.journal.claim(ctx, before, now, lease, limit)
}

// Remove deletes entries of the ledger's journal (see [journal.Store]).
func (l *Ledger) Remove(ctx context.Context, ids ...string) error {
	return l.journal.remove(ctx, ids)
}
