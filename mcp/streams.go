package mcp

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/event"
)

// streams are the open requests of sessions: GET event streams, and POSTs whose answer
// is pending. Each is checked again every RecheckInterval while it lasts, and at once
// when its key changes through the handler's Service; a refused credential ends it.
// Requests are the unit, not sessions, because each request carries its own credential
// (a rotated header key, a refreshed token) and because ending a request is immediate,
// while closing a session waits for its calls in flight.
type streams struct {
	mu   sync.Mutex
	live map[*openStream]struct{}
}

// An openStream is one open request.
type openStream struct {
	c      *caller
	keyID  string // the key the request authenticated with; "" for a session token
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	timer   *time.Timer
	refusal error // why the stream was ended, if it was
}

// open registers a request, returning its context, which is canceled when the stream
// is ended, and the function that unregisters it when the request is over.
func (s *streams) open(ctx context.Context, h *Handler, c *caller) (context.Context, *openStream, func()) {
	ctx, cancel := context.WithCancel(ctx)
	st := &openStream{c: c, keyID: c.p.Key.ID, ctx: ctx, cancel: cancel}
	s.mu.Lock()
	if s.live == nil {
		s.live = make(map[*openStream]struct{})
	}
	s.live[st] = struct{}{}
	s.mu.Unlock()
	st.mu.Lock()
	st.timer = time.AfterFunc(h.recheck, func() { h.tick(st) })
	st.mu.Unlock()
	return ctx, st, func() {
		st.mu.Lock()
		st.timer.Stop()
		st.mu.Unlock()
		cancel()
		s.mu.Lock()
		delete(s.live, st)
		s.mu.Unlock()
	}
}

// end ends a stream because its credential was refused.
func (st *openStream) end(err error) {
	st.mu.Lock()
	if st.refusal == nil {
		st.refusal = err
	}
	st.timer.Stop()
	st.mu.Unlock()
	st.cancel()
}

// refused returns why the stream was ended, or nil.
func (st *openStream) refused() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.refusal
}

// tick checks an open stream's credential again, and ends the stream or waits for the
// next check.
func (h *Handler) tick(st *openStream) {
	if st.ctx.Err() != nil {
		return
	}
	if err := h.checkAgain(st.ctx, st.c); err != nil {
		if st.ctx.Err() == nil {
			h.log.Info("mcp: ended a stream whose credential is refused", "key", st.keyID, "account", st.c.p.Account.ID, "error", err)
			st.end(err)
		}
		return
	}
	st.mu.Lock()
	if st.ctx.Err() == nil && st.refusal == nil {
		st.timer.Reset(h.recheck)
	}
	st.mu.Unlock()
}

// keyEvents are the changes after which the open streams of a key are checked again: a
// key rotated, updated or revoked, or a session that acted as it ended (a session that
// named no key has Key ""). They are this instance's changes; those made by other
// instances are noticed by the periodic checks.
var keyEvents = []event.Kind{event.KeyRotated, event.KeyUpdated, event.KeyRevoked, event.SessionEnded}

// keyEvent checks again the open streams of the key e is about.
func (h *Handler) keyEvent(_ context.Context, e event.Event) {
	if c, ok := e.(*event.Change); ok {
		h.keyChanged(c.Key)
	}
}

// keyChanged checks again, at once, every open stream of a key that the Service has
// just rotated or revoked, and the sessions bound to it: a revoked key's streams end,
// so do those opened with a rotated key's old value; those of OAuth connections
// survive a rotation.
func (h *Handler) keyChanged(keyID string) {
	defer h.recheckSessions(keyID)
	var affected []*openStream
	h.streams.mu.Lock()
	for st := range h.streams.live {
		if st.keyID == keyID {
			affected = append(affected, st)
		}
	}
	h.streams.mu.Unlock()
	for _, st := range affected {
		if err := h.checkAgain(st.ctx, st.c); err != nil && st.ctx.Err() == nil {
			st.end(err)
		}
	}
}

// closeAll ends every open stream, when the handler closes.
func (s *streams) closeAll() {
	s.mu.Lock()
	all := make([]*openStream, 0, len(s.live))
	for st := range s.live {
		all = append(all, st)
	}
	s.mu.Unlock()
	for _, st := range all {
		st.end(errClosed)
	}
}
