package gql

import (
	"container/list"
	"sync"
)

// A planCache remembers, per query, what its dry run found: the calls of a query that
// names APIs (so the next identical request skips the dry run), or the whole answer of
// one that names none (introspection, __typename: the same for every caller of the same
// schema). The key holds the schema version, the operation, the query text and the
// variables, so a hit is exactly the request that was planned. Clients send the same
// few queries over and over; planning them once halves the gateway's work.
type planCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element
	order   list.List // most recently used first
}

// A plan is what a query's dry run found.
type plan struct {
	calls []call // the APIs to run; nil for a query that names none
	body  []byte // the answer of a query that names no API
}

type cacheEntry struct {
	key string
	p   *plan
}

// maxCachedAnswer bounds the size of an answer kept in the cache.
const maxCachedAnswer = 64 << 10

func newPlanCache(max int) *planCache {
	return &planCache{max: max, entries: make(map[string]*list.Element, max)}
}

func (c *planCache) get(key string) *plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).p
}

func (c *planCache) put(key string, p *plan) {
	if len(p.body) > maxCachedAnswer {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		e.Value.(*cacheEntry).p = p
		c.order.MoveToFront(e)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, p: p})
	if c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}
