package memory

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/audit"
)

// AuditStore is the in-memory [audit.Store]. One mutex guards the log: changes to keys
// and credits are rare next to API calls. Listing scans the log, so it suits the
// entries of one process, not years of them. Its zero value is ready to use.
type AuditStore struct {
	mu      sync.Mutex
	seq     int64
	entries []audit.Entry       // in the order appended
	ids     map[string]struct{} // the IDs of entries, for those that have one
}

// Interface guard.
var _ audit.Store = (*AuditStore)(nil)

// NewAuditStore returns an empty AuditStore.
func NewAuditStore() *AuditStore { return &AuditStore{} }

// Append stores entries, all or none, skipping those whose ID is already stored.
func (s *AuditStore) Append(ctx context.Context, entries ...audit.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, e := range entries {
		if err := e.Validate(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		if e.ID != "" {
			if _, dup := s.ids[e.ID]; dup {
				continue
			}
			if s.ids == nil {
				s.ids = make(map[string]struct{})
			}
			s.ids[e.ID] = struct{}{}
		}
		s.seq++
		e.Seq = s.seq
		e.Before, e.After = slices.Clone(e.Before), slices.Clone(e.After)
		e.Addr = e.Addr.WithZone("")
		s.entries = append(s.entries, e)
	}
	return nil
}

// List returns the entries q selects, newest first.
func (s *AuditStore) List(ctx context.Context, q audit.Query) (audit.Page, error) {
	if err := ctx.Err(); err != nil {
		return audit.Page{}, err
	}
	limit, pos, after, err := audit.ParseQuery(q)
	if err != nil {
		return audit.Page{}, err
	}
	s.mu.Lock()
	var found []audit.Entry
	for _, e := range s.entries {
		if (q.Account == "" || e.Account == q.Account) &&
			(q.From.IsZero() || !e.At.Before(q.From)) && (q.To.IsZero() || e.At.Before(q.To)) &&
			(!after || pos.Before(e.At, e.Seq)) {
			found = append(found, e)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(found, func(a, b audit.Entry) int {
		return cmp.Or(b.At.Compare(a.At), cmp.Compare(b.Seq, a.Seq))
	})
	var page audit.Page
	if len(found) > limit {
		found = found[:limit]
		last := found[limit-1]
		page.Next = audit.Position{At: last.At, Seq: last.Seq}.Cursor()
	}
	page.Entries = make([]audit.Entry, len(found))
	for i, e := range found {
		e.Before, e.After = slices.Clone(e.Before), slices.Clone(e.After)
		page.Entries[i] = e
	}
	return page, nil
}

// Prune deletes the entries before before.
func (s *AuditStore) Prune(ctx context.Context, before time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.entries)
	s.entries = slices.DeleteFunc(s.entries, func(e audit.Entry) bool {
		if !e.At.Before(before) {
			return false
		}
		delete(s.ids, e.ID)
		return true
	})
	return int64(n - len(s.entries)), nil
}
