package catalog_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
)

// simple returns a minimal valid definition with the given id.
func simple(id string) catalog.API {
	return catalog.API{ID: id, Method: http.MethodGet, Cost: 1, Handler: nopHandler,
		Params: []catalog.Param{{Name: "n", Type: catalog.Integer, Max: catalog.Num(10)}}}
}

func ids(list []*catalog.API) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.ID
	}
	return out
}

// TestRegistryLookupList checks Lookup, List order, Remove and Version on the sample
// catalog.
func TestRegistryLookupList(t *testing.T) {
	var reg catalog.Registry // the zero value is ready to use
	if reg.Version() != 0 || len(reg.List()) != 0 {
		t.Fatalf("zero registry: version %d, list %v", reg.Version(), reg.List())
	}
	if _, ok := reg.Lookup("hash"); ok {
		t.Fatal("zero registry finds hash")
	}
	for i, def := range apis.All() {
		if err := reg.Register(def); err != nil {
			t.Fatalf("Register(%s): %v", def.ID, err)
		}
		if got := reg.Version(); got != uint64(i+1) {
			t.Errorf("after %d registrations, Version = %d", i+1, got)
		}
	}
	want := []string{"date-info", "echo", "hash", "hmac", "image-info", "uuid-generator"}
	if got := ids(reg.List()); !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	for _, id := range want {
		a, ok := reg.Lookup(id)
		if !ok || a.ID != id || a.InputSchema() == nil || a.Handler == nil {
			t.Errorf("Lookup(%q) = %v, %v", id, a, ok)
		}
	}
	for _, id := range []string{"", "Hash", "hash ", "nope", "dateinfo"} {
		if a, ok := reg.Lookup(id); ok || a != nil {
			t.Errorf("Lookup(%q) = %v, %v", id, a, ok)
		}
	}
	// The list is the caller's to keep and change.
	list := reg.List()
	list[0], list[1] = nil, nil
	if got := ids(reg.List()); !slices.Equal(got, want) {
		t.Errorf("changing a returned list changed the registry: %v", got)
	}
	// Lookup returns the same compiled API each time.
	a1, _ := reg.Lookup("hash")
	a2, _ := reg.Lookup("hash")
	if a1 != a2 {
		t.Error("Lookup returns different pointers for one API")
	}

	// A refused registration changes nothing.
	v := reg.Version()
	if err := reg.Register(apis.Hash()); !errors.Is(err, catalog.ErrDuplicate) {
		t.Errorf("duplicate: %v", err)
	}
	if err := reg.Register(catalog.API{ID: "bad"}); !errors.Is(err, catalog.ErrInvalidAPI) {
		t.Errorf("invalid: %v", err)
	}
	if reg.Version() != v || len(reg.List()) != len(want) {
		t.Errorf("refused registrations changed the registry: version %d -> %d", v, reg.Version())
	}

	// Remove.
	if !reg.Remove("echo") {
		t.Error("Remove(echo) = false")
	}
	if reg.Version() != v+1 {
		t.Errorf("Version after Remove = %d, want %d", reg.Version(), v+1)
	}
	if _, ok := reg.Lookup("echo"); ok {
		t.Error("echo still there after Remove")
	}
	if reg.Remove("echo") || reg.Remove("nope") {
		t.Error("Remove of an absent API = true")
	}
	if reg.Version() != v+1 {
		t.Errorf("Remove of an absent API changed Version to %d", reg.Version())
	}
	if got := ids(reg.List()); !slices.Equal(got, slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "echo" })) {
		t.Errorf("List after Remove = %v", got)
	}
	// A removed id can be registered again.
	if err := reg.Register(apis.Echo()); err != nil {
		t.Errorf("registering echo again: %v", err)
	}
	if reg.Version() != v+2 {
		t.Errorf("Version = %d, want %d", reg.Version(), v+2)
	}
}

// TestRegistryDuplicates checks that two APIs can share neither an id nor a GraphQL
// root field.
func TestRegistryDuplicates(t *testing.T) {
	tests := []struct {
		first, second string
		want          []string
	}{
		{"hash", "hash", []string{`id "hash"`}},
		{"ab-c", "a-bc", []string{`"a-bc"`, `"ab-c"`, "GraphQL root field abc"}},
		{"date-info", "dateinfo", []string{`"dateinfo"`, `"date-info"`, "dateinfo"}},
		{"a-b-c", "abc", []string{`"abc"`, `"a-b-c"`, "abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.first+"+"+tt.second, func(t *testing.T) {
			reg, err := catalog.NewRegistry(simple(tt.first))
			if err != nil {
				t.Fatal(err)
			}
			err = reg.Register(simple(tt.second))
			if !errors.Is(err, catalog.ErrDuplicate) {
				t.Fatalf("got %v, want ErrDuplicate", err)
			}
			if errors.Is(err, catalog.ErrInvalidAPI) {
				t.Errorf("%v also wraps ErrInvalidAPI", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if got := ids(reg.List()); !slices.Equal(got, []string{tt.first}) {
				t.Errorf("List = %v", got)
			}
			// NewRegistry reports the same error.
			if _, err := catalog.NewRegistry(simple(tt.first), simple(tt.second)); !errors.Is(err, catalog.ErrDuplicate) {
				t.Errorf("NewRegistry: %v", err)
			}
		})
	}
	if _, err := catalog.NewRegistry(simple("ok"), catalog.API{ID: "mcp", Method: "GET", Cost: 1, Handler: nopHandler}); !errors.Is(err, catalog.ErrInvalidAPI) {
		t.Errorf("NewRegistry with a reserved id: %v", err)
	}
}

// TestRegistrySubscribe checks that a subscriber hears about a change.
func TestRegistrySubscribe(t *testing.T) {
	reg := &catalog.Registry{}
	heard := make(chan uint64, 10)
	cancel := reg.Subscribe(func() { heard <- reg.Version() })
	defer cancel()

	wait := func(what string) uint64 {
		t.Helper()
		select {
		case v := <-heard:
			return v
		case <-t.Context().Done():
			t.Fatalf("no notification after %s", what)
			return 0
		}
	}
	if err := reg.Register(simple("one")); err != nil {
		t.Fatal(err)
	}
	// The registry has changed by the time the subscriber runs.
	if v := wait("Register"); v < 1 {
		t.Errorf("subscriber saw version %d after Register", v)
	}
	if _, ok := reg.Lookup("one"); !ok {
		t.Error("API missing after the notification")
	}
	reg.Remove("one")
	if v := wait("Remove"); v < 2 {
		t.Errorf("subscriber saw version %d after Remove", v)
	}
}

// TestRegistrySubscribeCancel checks, in a synctest bubble where "every notification
// has run" can be waited for exactly, that each subscriber is called once per change,
// not for refused changes, and never after it cancelled.
func TestRegistrySubscribeCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &catalog.Registry{}
		var a, b atomic.Int32
		cancelA := reg.Subscribe(func() { a.Add(1) })
		cancelB := reg.Subscribe(func() { b.Add(1) })

		if err := reg.Register(simple("one")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if a.Load() != 1 || b.Load() != 1 {
			t.Fatalf("after one change: a=%d b=%d, want 1 and 1", a.Load(), b.Load())
		}

		_ = reg.Register(simple("one")) // duplicate: no change
		reg.Remove("absent")            // no change
		synctest.Wait()
		if a.Load() != 1 || b.Load() != 1 {
			t.Fatalf("refused changes notified: a=%d b=%d", a.Load(), b.Load())
		}

		cancelA()
		cancelA() // cancelling twice is harmless
		if err := reg.Register(simple("two")); err != nil {
			t.Fatal(err)
		}
		reg.Remove("one")
		synctest.Wait()
		if a.Load() != 1 {
			t.Errorf("cancelled subscriber called %d times, want 1", a.Load())
		}
		if b.Load() != 3 {
			t.Errorf("subscriber called %d times, want 3", b.Load())
		}

		// The same function subscribed twice is two subscriptions.
		var c atomic.Int32
		f := func() { c.Add(1) }
		cancelC1 := reg.Subscribe(f)
		reg.Subscribe(f)
		cancelC1()
		reg.Remove("two")
		synctest.Wait()
		if c.Load() != 1 {
			t.Errorf("function subscribed twice, cancelled once: called %d times, want 1", c.Load())
		}
		cancelB()
	})
}

// TestRegistryConcurrent runs Register, Remove, Lookup, List, Version and Subscribe from
// many goroutines (meaningful under -race) and checks the final state.
func TestRegistryConcurrent(t *testing.T) {
	reg := &catalog.Registry{}
	var notified atomic.Int64
	cancel := reg.Subscribe(func() { notified.Add(1) })
	defer cancel()

	const writers, perWriter = 8, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				id := fmt.Sprintf("api-%d-%d", w, i)
				if err := reg.Register(simple(id)); err != nil {
					t.Errorf("Register(%s): %v", id, err)
				}
				// Every writer also races on one shared id: exactly one wins.
				_ = reg.Register(simple("shared"))
				if i%2 == 1 {
					if !reg.Remove(id) {
						t.Errorf("Remove(%s) = false", id)
					}
				}
			}
		})
	}
	for range 8 {
		wg.Go(func() {
			var last uint64
			for range 200 {
				v := reg.Version()
				if v < last {
					t.Errorf("Version went back from %d to %d", last, v)
				}
				last = v
				list := reg.List()
				if !slices.IsSortedFunc(list, func(a, b *catalog.API) int { return strings.Compare(a.ID, b.ID) }) {
					t.Errorf("List not sorted: %v", ids(list))
				}
				for _, a := range list {
					if _, err := a.ValidateJSON(map[string]any{"n": 3}); err != nil {
						t.Errorf("%s: %v", a.ID, err)
					}
				}
				if a, ok := reg.Lookup("api-0-0"); ok && a.ID != "api-0-0" {
					t.Errorf("Lookup(api-0-0) = %s", a.ID)
				}
			}
		})
	}
	wg.Wait()

	list := reg.List()
	if len(list) != writers*perWriter/2+1 {
		t.Errorf("%d APIs registered, want %d", len(list), writers*perWriter/2+1)
	}
	if _, ok := reg.Lookup("shared"); !ok {
		t.Error("shared API missing")
	}
	// Registrations + removals + the one shared registration.
	if want := uint64(writers*perWriter + writers*perWriter/2 + 1); reg.Version() != want {
		t.Errorf("Version = %d, want %d", reg.Version(), want)
	}
}
