package catalog

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrDuplicate is wrapped by the error [Registry.Register] returns for an id, or a
// GraphQL root field, that is already taken.
var ErrDuplicate = errors.New("catalog: API already registered")

// An APIRegistry is the set of APIs a service publishes. Every front door reads the
// catalog through it: REST looks APIs up by id, GraphQL rebuilds its schema when the
// version changes, MCP announces changes to connected clients.
//
// Implementations must be safe for concurrent use. The *API values they return are
// compiled (see [Compile]) and must not be modified by callers.
type APIRegistry interface {
	// Lookup returns the API with the given id.
	Lookup(id string) (*API, bool)
	// List returns every API, sorted by id, in a slice the caller may keep.
	List() []*API
	// Version returns a number that changes whenever the set of APIs changes.
	Version() uint64
	// Subscribe arranges for fn to be called, on a goroutine of the registry's choice,
	// after each change. The returned function stops the calls.
	Subscribe(fn func()) (cancel func())
}

// A Registry is the in-memory [APIRegistry]. Its zero value is an empty registry ready
// to use. It is safe for concurrent use; lookups take no lock.
type Registry struct {
	mu      sync.Mutex // serializes changes
	apis    atomic.Pointer[map[string]*API]
	version atomic.Uint64
	subs    map[*func()]struct{}
}

// Interface guard.
var _ APIRegistry = (*Registry)(nil)

// NewRegistry returns a registry holding the given APIs, or the first error
// [Registry.Register] reports.
func NewRegistry(apis ...API) (*Registry, error) {
	r := &Registry{}
	for _, a := range apis {
		if err := r.Register(a); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register compiles def (see [Compile]) and adds it. It refuses a definition without a
// handler or otherwise invalid
// (the error wraps [ErrInvalidAPI]) and an id or GraphQL root field that another API
// already has (the error wraps [ErrDuplicate]), so that no two APIs can ever share a
// name in any protocol.
func (r *Registry) Register(def API) error {
	if def.Handler == nil {
		return fmt.Errorf("%w: api %q: no handler", ErrInvalidAPI, def.ID)
	}
	a, err := Compile(def)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.load()
	if _, dup := old[a.ID]; dup {
		return fmt.Errorf("%w: id %q", ErrDuplicate, a.ID)
	}
	root := RootFieldName(a.ID)
	for _, other := range old {
		if RootFieldName(other.ID) == root {
			return fmt.Errorf("%w: %q and %q both map to GraphQL root field %s", ErrDuplicate, a.ID, other.ID, root)
		}
	}
	next := make(map[string]*API, len(old)+1)
	for id, o := range old {
		next[id] = o
	}
	next[a.ID] = a
	r.publish(next)
	return nil
}

// Remove deletes the API with the given id. It reports whether the API was there.
func (r *Registry) Remove(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.load()
	if _, ok := old[id]; !ok {
		return false
	}
	next := make(map[string]*API, len(old))
	for k, a := range old {
		if k != id {
			next[k] = a
		}
	}
	r.publish(next)
	return true
}

// publish swaps in the new set and tells subscribers. r.mu is held.
func (r *Registry) publish(next map[string]*API) {
	r.apis.Store(&next)
	r.version.Add(1)
	for fn := range r.subs {
		go (*fn)()
	}
}

func (r *Registry) load() map[string]*API {
	if m := r.apis.Load(); m != nil {
		return *m
	}
	return nil
}

// Lookup returns the API with the given id.
func (r *Registry) Lookup(id string) (*API, bool) {
	a, ok := r.load()[id]
	return a, ok
}

// List returns every API sorted by id.
func (r *Registry) List() []*API {
	m := r.load()
	out := make([]*API, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *API) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Version returns a number that changes whenever the set of APIs changes.
func (r *Registry) Version() uint64 { return r.version.Load() }

// Subscribe arranges for fn to be called on a new goroutine after each change.
func (r *Registry) Subscribe(fn func()) (cancel func()) {
	key := &fn
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.subs == nil {
		r.subs = make(map[*func()]struct{})
	}
	r.subs[key] = struct{}{}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.subs, key)
	}
}
