package redis

import (
	"context"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// Interface guard.
var _ auth.SessionStore = (*Store)(nil)

// endedKey is the key that marks the session id ended: "<prefix>:ended-session:<id>".
func (s *Store) endedKey(id string) string { return s.prefix + ":ended-session:" + id }

// EndSession records that the session id is ended until expires: one key, which Redis
// deletes at the session's expiry (its lifetime is expires - now, on the caller's
// clock). A session whose expiry is not after now needs no key.
func (s *Store) EndSession(ctx context.Context, id string, expires, now time.Time) error {
	if err := store.CheckSessionID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ttl := expires.Sub(now)
	if ttl <= 0 {
		return nil
	}
	// A session's expiry is in its token, so ending it again sets the same instant.
	if _, err := s.writeCmd(ctx, "set", s.endedKey(id), "1", "px", max(ms(ttl), 1)); err != nil {
		return fail(ctx, err, "ending session %q", id)
	}
	return nil
}

// SessionEnded reports whether the session id was ended.
func (s *Store) SessionEnded(ctx context.Context, id string) (bool, error) {
	if err := store.CheckSessionID(id); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	n, err := s.c.Exists(ctx, s.endedKey(id)).Result()
	if err != nil {
		return false, fail(ctx, err, "reading session %q", id)
	}
	return n == 1, nil
}
