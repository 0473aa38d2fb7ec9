package memory

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestNames checks that names numbers strings in order, finds each by its number and
// offset, gives the empty and long strings back whole, and keeps strings whose hashes
// collide apart (the collision forced by adding them under one hash).
func TestNames(t *testing.T) {
	var ns names
	if _, ok := ns.lookup("a"); ok {
		t.Fatal("the empty names found \"a\"")
	}
	words := []string{"acct-1", "", strings.Repeat("x", 300), "ünïcode", "acct-10"}
	refs := make([]nameRef, len(words))
	for i, w := range words {
		refs[i] = ns.intern(w)
		if refs[i].i != uint32(i) {
			t.Errorf("intern(%q) numbered it %d, want %d", w, refs[i].i, i)
		}
	}
	for i, w := range words {
		if r := ns.intern(w); r != refs[i] {
			t.Errorf("intern(%q) again = %+v, want %+v", w, r, refs[i])
		}
		if got := ns.at(refs[i].off); got != w {
			t.Errorf("at(offset of %q) = %q", w, got)
		}
	}
	if _, ok := ns.lookup("acct-2"); ok {
		t.Error("lookup found acct-2, which was never added")
	}

	// Three strings under one hash: each is found, a fourth is not.
	const h = 42
	var collided []nameRef
	for i := range 3 {
		s := fmt.Sprintf("same-hash-%d", i)
		if _, ok := ns.lookupHashed(s, h); ok {
			t.Fatalf("%s found before it was added", s)
		}
		collided = append(collided, ns.addHashed(s, h))
	}
	for i, want := range collided {
		s := fmt.Sprintf("same-hash-%d", i)
		if r, ok := ns.lookupHashed(s, h); !ok || r != want {
			t.Errorf("lookupHashed(%s) = %+v, %v; want %+v", s, r, ok, want)
		}
	}
	if r, ok := ns.lookupHashed("same-hash-3", h); ok {
		t.Errorf("lookupHashed(same-hash-3), never added, found %+v", r)
	}
}

// TestNamesGrow checks that names finds every one of many strings after its index has
// grown many times, with each string's number and offset.
func TestNamesGrow(t *testing.T) {
	var ns names
	const n = 50_000
	refs := make([]nameRef, n)
	for i := range n {
		refs[i] = ns.add(fmt.Sprintf("acct-%d", i))
	}
	for i := range n {
		s := fmt.Sprintf("acct-%d", i)
		if r, ok := ns.lookup(s); !ok || r != refs[i] || r.i != uint32(i) || ns.at(r.off) != s {
			t.Fatalf("lookup(%s) = %+v, %v; want %+v", s, r, ok, refs[i])
		}
	}
	if r, ok := ns.lookup(fmt.Sprintf("acct-%d", n)); ok {
		t.Errorf("lookup of a string never added found %+v", r)
	}
}

// TestHashIndex puts and removes values under few hashes, so that they crowd into runs
// that wrap around the end of the table, and checks after each step that every value
// left is found under its hash and no removed one is.
func TestHashIndex(t *testing.T) {
	var x hashIndex
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[uint64]uint64{}                                 // value -> hash
	hashOf := func(v uint64) uint64 { return ^uint64(0) - v%7 } // the last slots, then the first
	for step := range 5000 {
		v := uint64(rng.IntN(200))
		if _, held := want[v]; held {
			_, slot, ok := x.find(hashOf(v), func(c uint64) bool { return c == v })
			if !ok {
				t.Fatalf("step %d: value %d not found before its removal", step, v)
			}
			x.remove(slot)
			delete(want, v)
		} else {
			x.put(hashOf(v), v)
			want[v] = hashOf(v)
		}
		for c := range uint64(200) {
			_, _, ok := x.find(hashOf(c), func(got uint64) bool { return got == c })
			if _, held := want[c]; ok != held {
				t.Fatalf("step %d: find(%d) found it: %v, want %v", step, c, ok, held)
			}
		}
	}
	if x.n != len(want) {
		t.Errorf("the index counts %d values, want %d", x.n, len(want))
	}
}

// TestNamesShare checks that two names sharing one text keep their own numbers and find
// only their own strings, the same string in both included.
func TestNamesShare(t *testing.T) {
	var accounts, keys names
	accounts.share(&keys)
	a0, k0 := accounts.add("acct-1"), keys.add("acct-1-primary")
	a1, k1 := accounts.add("acct-2"), keys.add("acct-2") // one string in both
	if a0.i != 0 || a1.i != 1 || k0.i != 0 || k1.i != 1 {
		t.Errorf("numbers %d, %d and %d, %d; want 0, 1 in each", a0.i, a1.i, k0.i, k1.i)
	}
	if k0.off <= a0.off || a1.off <= k0.off {
		t.Errorf("offsets %d, %d, %d are not in the order the names were added", a0.off, k0.off, a1.off)
	}
	for _, c := range []struct {
		ns   *names
		s    string
		want nameRef
		ok   bool
	}{
		{&accounts, "acct-1", a0, true}, {&accounts, "acct-2", a1, true}, {&accounts, "acct-1-primary", nameRef{}, false},
		{&keys, "acct-1-primary", k0, true}, {&keys, "acct-2", k1, true}, {&keys, "acct-1", nameRef{}, false},
	} {
		if r, ok := c.ns.lookup(c.s); r != c.want || ok != c.ok {
			t.Errorf("lookup(%q) = %+v, %v; want %+v, %v", c.s, r, ok, c.want, c.ok)
		}
		if c.ok && c.ns.at(c.want.off) != c.s {
			t.Errorf("at(%d) = %q, want %q", c.want.off, c.ns.at(c.want.off), c.s)
		}
	}
}
