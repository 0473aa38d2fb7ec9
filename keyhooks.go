package tollgate

import "sync"

// OnKeyChange arranges for fn to be called with a key's id each time this service
// rotates, revokes or updates that key ([Service.RotateKey], [Service.RevokeKey],
// [Service.UpdateKey], and their self-service forms), or ends a session that acts as
// it ([Service.EndSession]; keyID is "" for a session that named no key), after the
// change is stored and before the call returns. Front doors that hold connections open
// use it to check the key's connections again at once (not to end them all: after a
// sign-out, only the ended session's are refused): package mcp closes the open streams
// of a revoked key, or of a session that signed out, this way.
//
// Changes made by other instances on the same stores, or directly in the key store, are
// not reported; a front door that must notice them also checks its connections
// periodically. fn runs on the goroutine of the change and should return promptly. The
// returned function stops the calls.
func (s *Service) OnKeyChange(fn func(keyID string)) (cancel func()) {
	return s.keyHooks.add(fn)
}

// keyHooks holds the functions registered with OnKeyChange.
type keyHooks struct {
	mu  sync.Mutex
	fns map[*func(string)]struct{}
}

func (k *keyHooks) add(fn func(string)) (cancel func()) {
	p := &fn
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fns == nil {
		k.fns = make(map[*func(string)]struct{})
	}
	k.fns[p] = struct{}{}
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		delete(k.fns, p)
	}
}

// notify calls every registered function with keyID, outside the lock, so that a
// function may cancel itself or register others.
func (k *keyHooks) notify(keyID string) {
	k.mu.Lock()
	fns := make([]func(string), 0, len(k.fns))
	for p := range k.fns {
		fns = append(fns, *p)
	}
	k.mu.Unlock()
	for _, fn := range fns {
		fn(keyID)
	}
}
