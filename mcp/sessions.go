package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
)

// sessions are the handler's bookkeeping of the SDK's sessions: how many each key
// holds and the process holds, capped, and, for each live session, the protocol
// version it agreed on and the credential that opened it.
//
// A session takes a slot when its initialize arrives, before the SDK builds it: the
// caps refuse the initialize without the SDK spending anything. The slot is bound to
// the session once the SDK has initialized it, or freed when it did not. A bound slot
// is freed when the session ends, whichever way: DELETE, the idle timeout, Close, or
// the handler closing it when its key is revoked or rotated (see recheck), which a
// goroutine that waits for the session's end learns.
type sessions struct {
	perKey, max int
	idle        time.Duration // the session timeout, for the refusal's message
	log         *slog.Logger

	mu     sync.Mutex
	total  int                     // slots taken: reserved or bound
	byUser map[string]int          // slots taken, by caller's user
	live   map[string]*liveSession // bound, by session id
	full   bool                    // the process cap was reached (logged once, until a tenth of the slots free)
}

// A slot is one session's place under the caps.
type slot struct {
	user  string     // the caller's user: the session's owner for the SDK
	keyID string     // the key that opened it; "" for a session token that names none
	cred  credential // the credential that opened it, checked again when its key changes
	state slotState  // guarded by sessions.mu
}

type slotState uint8

const (
	reserved slotState = iota // the initialize is being served
	bound                     // the session is live
	freed
)

// A liveSession is a session of the SDK that holds a slot.
type liveSession struct {
	slot    *slot
	version string // the protocol version it agreed on
	ss      *sdk.ServerSession
}

// The refusals of an initialize beyond the caps.
var (
	errKeySessions     = errors.New("mcp: too many sessions for the key")
	errProcessSessions = errors.New("mcp: too many sessions in the process")
)

func newSessions(perKey, max int, idle time.Duration, log *slog.Logger) *sessions {
	if perKey <= 0 {
		perKey = DefaultMaxSessionsPerKey
	}
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return &sessions{perKey: perKey, max: max, idle: idle, log: log, byUser: map[string]int{}, live: map[string]*liveSession{}}
}

// reserve takes a slot for a session that c's initialize is about to start, or
// refuses it with an error whose text says which cap it reached (errKeySessions or
// errProcessSessions under errors.Is).
func (s *sessions) reserve(c *caller) (*slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byUser[c.user] >= s.perKey {
		return nil, &capError{errKeySessions, fmt.Sprintf(
			"this key already has %d live session%s, the most it may have; end one with DELETE (with its Mcp-Session-Id), or reuse one: a session closes after %s without requests",
			s.perKey, plural(int64(s.perKey)), s.idle)}
	}
	if s.total >= s.max {
		if !s.full {
			s.full = true
			s.log.Warn("mcp: the process holds as many sessions as it may; initialize requests are refused until one ends", "sessions", s.total)
		}
		return nil, &capError{errProcessSessions, fmt.Sprintf(
			"the server holds %d live session%s, the most it may; retry later", s.max, plural(int64(s.max)))}
	}
	s.total++
	s.byUser[c.user]++
	return &slot{user: c.user, keyID: c.p.Key.ID, cred: c.cred}, nil
}

// A capError is a refusal by a cap: its text is the message for the client.
type capError struct {
	kind error
	text string
}

func (e *capError) Error() string { return e.text }
func (e *capError) Unwrap() error { return e.kind }

// settle frees a slot whose session was not bound by the time its initialize was
// served (it failed, or never reached the SDK). sl may be nil.
func (s *sessions) settle(sl *slot) {
	if sl == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl.state == reserved {
		s.free(sl)
	}
}

// free gives a slot back; s.mu is held.
func (s *sessions) free(sl *slot) {
	sl.state = freed
	s.total--
	if s.total <= s.max-max(1, s.max/10) {
		s.full = false
	}
	if s.byUser[sl.user]--; s.byUser[sl.user] <= 0 {
		delete(s.byUser, sl.user)
	}
}

// bind binds a reserved slot to the session its initialize started, which agreed on
// version, and frees it when the session ends. A slot freed already (its request
// ended before the SDK answered) leaves the session without one: it is closed.
func (s *sessions) bind(sl *slot, ss *sdk.ServerSession, version string) {
	id := ss.ID()
	s.mu.Lock()
	if sl.state != reserved || id == "" {
		s.mu.Unlock()
		go ss.Close()
		return
	}
	sl.state = bound
	s.live[id] = &liveSession{slot: sl, version: version, ss: ss}
	s.mu.Unlock()
	go func() {
		ss.Wait()
		s.end(id)
	}()
}

// end frees the slot of a session that ended.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls, ok := s.live[id]; ok {
		delete(s.live, id)
		s.free(ls.slot)
	}
}

// count returns the number of live sessions.
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// LiveSessions returns the number of MCP sessions the handler holds open now: those
// initialized and not yet ended (by DELETE, their idle timeout, [Handler.Close], or
// their key's revocation), for metrics and health checks. Initializations being served
// are not counted.
func (h *Handler) LiveSessions() int { return h.sessions.count() }

// version returns the protocol version a live session agreed on.
func (s *sessions) version(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls, ok := s.live[id]
	if !ok {
		return "", false
	}
	return ls.version, true
}

// ofKey returns the live sessions opened with a key: keyID, or for "" those opened
// with a session token that names no key.
func (s *sessions) ofKey(keyID string) []*liveSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*liveSession
	for _, ls := range s.live {
		if ls.slot.keyID == keyID {
			out = append(out, ls)
		}
	}
	return out
}

// recheckTimeout bounds the checks of a key's sessions after it changed.
const recheckTimeout = 10 * time.Second

// recheckSessions checks again the credential that opened each live session of a key
// that the Service has just rotated or revoked (or a session token that signed out),
// and closes the sessions whose credential is refused, freeing their slots: a revoked
// key's sessions close, so do those opened with a rotated key's old value, which can
// no longer be used; those of OAuth connections survive a rotation. A credential that
// cannot be checked (a store that does not answer) leaves its sessions to their
// timeout. The sessions close in the background, since closing one waits for its calls
// in flight.
func (h *Handler) recheckSessions(keyID string) {
	affected := h.sessions.ofKey(keyID)
	if len(affected) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), recheckTimeout)
	defer cancel()
	refused := map[credential]bool{}
	for _, ls := range affected {
		no, ok := refused[ls.slot.cred]
		if !ok {
			_, _, err := h.authenticateAs(ctx, ls.slot.cred, true)
			no = err != nil && (errors.Is(err, errInvalidToken) || credentialRefused(tollgate.CodeOf(err)))
			refused[ls.slot.cred] = no
		}
		if no {
			go ls.ss.Close()
		}
	}
}

// credentialRefused reports whether a code refuses a credential for good, rather than
// failing to check it.
func credentialRefused(c tollgate.Code) bool {
	switch c {
	case tollgate.CodeUnauthorized, tollgate.CodeForbidden, tollgate.CodeNoCredential, tollgate.CodeMalformedCredential:
		return true
	}
	return false
}
