package memory

import (
	"hash/maphash"
	"math"
	"time"
	"unsafe"
)

// The stores keep their per-account records in forms that hold no pointers, so that
// the garbage collector, which follows every pointer of the live heap on every cycle,
// has nothing to follow in them however many accounts there are: records sit in
// slices of pointer-free structs (a slice is one object, not scanned when its element
// type has no pointers), strings sit back to back in one byte array and are referred
// to by number, and indexes are maps whose keys and values hold no pointers (such a
// map is not scanned either). The types of this file are those pieces.

// names numbers distinct strings in the order they were added (0, 1, 2, ...) and finds
// a string's number. The strings are kept back to back in one byte array, and the
// index holds only their hashes, so that a million names cost the collector nothing to
// scan. Its zero value is empty and ready to use. It is not safe for concurrent use: its
// owner locks it (reads may run together).
type names struct {
	seed  maphash.Seed
	text  []byte            // every name, back to back; bytes once written never change
	spans []span            // name i is text[spans[i].off:][:spans[i].n]
	first map[uint64]uint32 // hash of a name -> 1 + the first name with that hash
	next  []uint32          // per name: 1 + the next name with the same hash, 0 for none
}

type span struct{ off, n int }

// lookup returns the number of s, if it was added.
func (ns *names) lookup(s string) (uint32, bool) {
	if ns.first == nil {
		return 0, false
	}
	for i := ns.first[maphash.String(ns.seed, s)]; i != 0; i = ns.next[i-1] {
		if ns.name(i-1) == s {
			return i - 1, true
		}
	}
	return 0, false
}

// add adds s, which the caller has looked up and not found, and returns its number.
func (ns *names) add(s string) uint32 {
	if ns.first == nil {
		ns.seed, ns.first = maphash.MakeSeed(), make(map[uint64]uint32)
	}
	i := uint32(len(ns.spans))
	h := maphash.String(ns.seed, s)
	ns.spans = append(ns.spans, span{off: len(ns.text), n: len(s)})
	ns.text = append(ns.text, s...)
	ns.next = append(ns.next, ns.first[h]) // a name added later is found first
	ns.first[h] = i + 1
	return i
}

// intern returns the number of s, adding it if it is new.
func (ns *names) intern(s string) uint32 {
	if i, ok := ns.lookup(s); ok {
		return i
	}
	return ns.add(s)
}

// name returns name i, without copying it: the string shares the bytes of text, which
// are never written again (a growing text moves to a new array and leaves the old one,
// still referred to by the strings made from it, as it was).
func (ns *names) name(i uint32) string {
	sp := ns.spans[i]
	if sp.n == 0 {
		return ""
	}
	return unsafe.String(&ns.text[sp.off], sp.n)
}

// A stamp is a time.Time without its location and monotonic reading (which hold or
// need a pointer): the stores give times back in UTC. The zero stamp is the zero time.
type stamp struct {
	sec  int64 // Unix seconds, minus zeroSec, so that the zero time is the zero stamp
	nsec int32
}

// zeroSec is the Unix time of the zero time.Time.
var zeroSec = time.Time{}.Unix()

func stampOf(t time.Time) stamp {
	return stamp{sec: t.Unix() - zeroSec, nsec: int32(t.Nanosecond())}
}

// before reports whether s is before o.
func (s stamp) before(o stamp) bool {
	return s.sec < o.sec || s.sec == o.sec && s.nsec < o.nsec
}

func (s stamp) time() time.Time {
	if s == (stamp{}) {
		return time.Time{}
	}
	return time.Unix(s.sec+zeroSec, int64(s.nsec)).UTC()
}

// chunkSize is the number of records in one chunk of a [table].
const chunkSize = 1024

// A table is a growing array of records that never move: they sit in chunks of
// chunkSize, so that a pointer to a record (and the lock in it) stays valid while the
// table grows, and a chunk of pointer-free records is one object the collector does not
// scan. It is not safe for concurrent use: its owner locks it.
type table[T any] struct {
	chunks []*[chunkSize]T
	n      uint32
}

// add appends a zero record and returns its number and address.
func (t *table[T]) add() (uint32, *T) {
	if t.n == math.MaxUint32 {
		panic("memory: more than 2^32-1 records in one table")
	}
	i := t.n
	if int(i/chunkSize) == len(t.chunks) {
		t.chunks = append(t.chunks, new([chunkSize]T))
	}
	t.n++
	return i, &t.chunks[i/chunkSize][i%chunkSize]
}

// at returns the address of record i, which must exist.
func (t *table[T]) at(i uint32) *T { return &t.chunks[i/chunkSize][i%chunkSize] }
