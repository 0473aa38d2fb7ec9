package gql

import (
	"container/list"
	"sync"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/tollgate-dev/tollgate"
)

// A planCache remembers, per query, its plan: the calls of a query that names APIs and
// the shape of its answers (so that the next identical request is neither parsed nor
// executed by graphql-go), or the whole answer of one that names none (introspection,
// __typename: the same for every caller of the same schema). The key holds the schema
// version, the operation, the query text and the variables, so a hit is exactly the
// request that was planned. Clients send the same few queries over and over.
type planCache struct {
	lru[*plan]
}

// A plan is what graphql-go's execution of a query with the probes found (see
// Handler.plan).
type plan struct {
	calls []call // the APIs to run; nil for a query that names none
	// items are the service's items, one per distinct call; itemOf[i] is the index
	// of calls[i]'s. refused, when not nil, refuses the query instead: it is beyond
	// one of the gateway's limits.
	items   []tollgate.Item
	itemOf  []int
	refused error
	body    []byte // the answer of a query that names no API
	// shape is the shape of the answers when shaped is set (see shape.go); a query
	// without one is answered through graphql-go's execution. template is graphql-go's
	// answer to the probes, which the shape's values (introspection) point into.
	shape    []shapeField
	shaped   bool
	template []byte
	// errors are graphql-go's errors of a query that cannot run: its answer. Such a
	// plan is not kept.
	errors []*gqlerrors.QueryError
}

// maxCachedAnswer bounds the size of an answer, or of the answer to the probes of a
// shape, kept in the cache.
const maxCachedAnswer = 64 << 10

func newPlanCache(max int) *planCache {
	return &planCache{newLRU[*plan](max)}
}

// lookup returns the plan kept under key, or nil.
func (c *planCache) lookup(key []byte) *plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, _ := c.found(c.entries[string(key)]) // no copy of key: the conversion is in the index
	return p
}

func (c *planCache) put(key string, p *plan) {
	if len(p.body) > maxCachedAnswer || len(p.template) > maxCachedAnswer {
		return
	}
	c.lru.put(key, p)
}

// A requestCache remembers decoded request bodies, so that a body seen before is not
// decoded again: the same few queries arrive over and over, and decoding the JSON
// envelope is a good part of a cheap query's cost. Only bodies without variables are
// kept (a request's variables map is handed to graphql-go, which may add defaults to
// it), and only short ones, so the cache holds at most max times maxCachedBody bytes.
// A body is cached only once it has passed every check, so a hit is a valid request.
type requestCache struct {
	lru[request]
}

// maxCachedBody bounds the size of a request body kept in the cache.
const maxCachedBody = 4 << 10

func newRequestCache(max int) *requestCache {
	return &requestCache{newLRU[request](max)}
}

// lookup returns the request decoded from body before, if any.
func (c *requestCache) lookup(body []byte) (request, bool) {
	if len(body) > maxCachedBody {
		return request{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.found(c.entries[string(body)]) // no copy of body: the conversion is in the index
}

// keep remembers the request decoded from body, if it may be shared.
func (c *requestCache) keep(body []byte, req request) {
	if len(body) > maxCachedBody || req.Variables != nil {
		return
	}
	c.lru.put(string(body), req)
}

// An lru maps keys to values, keeping the max most recently used.
type lru[V any] struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element
	order   list.List // most recently used first
}

type lruEntry[V any] struct {
	key string
	v   V
}

func newLRU[V any](max int) lru[V] {
	return lru[V]{max: max, entries: make(map[string]*list.Element, max)}
}

// get returns the value of key, or the zero value.
func (c *lru[V]) get(key string) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, _ := c.found(c.entries[key])
	return v
}

// found returns the value of entry e, marking it the most recently used, or the zero
// value and false when e is nil (the key has no entry). c.mu must be held.
func (c *lru[V]) found(e *list.Element) (V, bool) {
	if e == nil {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[V]).v, true
}

// put sets the value of key, dropping the least recently used entry if the cache is
// full.
func (c *lru[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		e.Value.(*lruEntry[V]).v = v
		c.order.MoveToFront(e)
		return
	}
	c.entries[key] = c.order.PushFront(&lruEntry[V]{key: key, v: v})
	if c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*lruEntry[V]).key)
	}
}
