package gql

import "testing"

// TestPlanCacheBounds: the cache keeps at most its capacity, dropping the least recently
// used entry, and refuses answers too large to keep.
func TestPlanCacheBounds(t *testing.T) {
	c := newPlanCache(2)
	a, b, d := &plan{body: []byte("a")}, &plan{body: []byte("b")}, &plan{body: []byte("d")}
	c.put("a", a)
	c.put("b", b)
	if c.get("a") != a { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.put("d", d)
	if c.get("b") != nil {
		t.Error("b, the least recently used, is still cached")
	}
	if c.get("a") != a || c.get("d") != d {
		t.Error("a or d dropped")
	}
	if n := len(c.entries); n != 2 {
		t.Errorf("%d entries, want 2", n)
	}
	c.put("big", &plan{body: make([]byte, maxCachedAnswer+1)})
	if c.get("big") != nil {
		t.Error("an answer larger than maxCachedAnswer was cached")
	}
	c.put("a", d) // replacing keeps one entry
	if c.get("a") != d || len(c.entries) != 2 {
		t.Error("replacing an entry")
	}
}

// TestRequestCache: a decoded body is found again by its bytes; a body with variables
// (whose map graphql-go may change) and a body too long to keep are not kept.
func TestRequestCache(t *testing.T) {
	c := newRequestCache(2)
	q := "{ __typename }"
	body := []byte(`{"query":"{ __typename }"}`)
	c.keep(body, request{Query: &q})
	if got, ok := c.lookup([]byte(string(body))); !ok || got.Query != &q {
		t.Fatalf("lookup of a kept body = %+v, %v; want the kept request", got, ok)
	}
	withVars := []byte(`{"query":"query($t: String!) { hash(text: $t) { hash } }","variables":{"t":"x"}}`)
	c.keep(withVars, request{Query: &q, Variables: map[string]any{"t": "x"}})
	if _, ok := c.lookup(withVars); ok {
		t.Error("a body with variables was kept")
	}
	long := make([]byte, maxCachedBody+1)
	c.keep(long, request{Query: &q})
	if _, ok := c.lookup(long); ok {
		t.Error("a body longer than maxCachedBody was kept")
	}
	if _, ok := c.lookup([]byte(`{"query":"{ other }"}`)); ok {
		t.Error("lookup of a body never kept found something")
	}
}

// TestPlanCacheKeepsSmallShapes: a plan whose shape points into a large answer to its
// probes (introspection beside an API) is not kept.
func TestPlanCacheKeepsSmallShapes(t *testing.T) {
	c := newPlanCache(2)
	c.put("small", &plan{shaped: true, template: make([]byte, 100)})
	c.put("big", &plan{shaped: true, template: make([]byte, maxCachedAnswer+1)})
	if c.get("small") == nil {
		t.Error("a small shape was not kept")
	}
	if c.get("big") != nil {
		t.Error("a shape over a template larger than maxCachedAnswer was kept")
	}
}
