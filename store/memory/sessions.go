package memory

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// SessionStore is the in-memory [auth.SessionStore]: the ids of the sessions ended
// before their expiry, for one process. Each [SessionStore.EndSession] forgets the ids
// whose expiry has passed, so it holds at most the sessions ended within one session
// lifetime. Its zero value is ready to use.
type SessionStore struct {
	mu    sync.Mutex
	ended map[string]time.Time // id -> expiry
}

// Interface guard.
var _ auth.SessionStore = (*SessionStore)(nil)

// NewSessionStore returns an empty SessionStore.
func NewSessionStore() *SessionStore { return &SessionStore{} }

// EndSession records that the session id is ended until expires, and forgets the
// sessions whose expiry is not after now.
func (s *SessionStore) EndSession(ctx context.Context, id string, expires, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckSessionID(id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for other, e := range s.ended {
		if !e.After(now) {
			delete(s.ended, other)
		}
	}
	if !expires.After(now) {
		return nil
	}
	if s.ended == nil {
		s.ended = map[string]time.Time{}
	}
	if e, ok := s.ended[id]; !ok || expires.After(e) {
		s.ended[id] = expires
	}
	return nil
}

// SessionEnded reports whether the session id was ended.
func (s *SessionStore) SessionEnded(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := store.CheckSessionID(id); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ended[id]
	return ok, nil
}
