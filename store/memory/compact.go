package memory

import (
	"encoding/binary"
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

// A hashIndex maps hashes to values (below 2^64-1), several values possibly under one
// hash: an open-addressing table with linear probing, which holds no pointers, and in
// which finding a value reads one slot (a Go map reads its table's header, a control
// word and a slot, each a cache miss in a table larger than the CPU's caches). Its owner
// checks a candidate value (its record's key) with the match function of find. Its zero
// value is empty and ready to use. It is not safe for concurrent use.
type hashIndex struct {
	slots []hashSlot // a power of two of them, at most 3/4 used; hash h is at h&mask or after
	n     int        // the slots used
}

// A hashSlot is a slot of a [hashIndex]: a hash and 1 + its value, or 0 for an empty
// slot.
type hashSlot struct {
	hash, v uint64
}

// find returns the first value under hash h that match accepts, and the number of its
// slot (for remove).
func (x *hashIndex) find(h uint64, match func(v uint64) bool) (v uint64, slot int, ok bool) {
	mask := uint64(len(x.slots) - 1)
	for j := h & mask; len(x.slots) > 0; j = (j + 1) & mask {
		sl := x.slots[j]
		if sl.v == 0 {
			break
		}
		if sl.hash == h && match(sl.v-1) {
			return sl.v - 1, int(j), true
		}
	}
	return 0, 0, false
}

// put adds value v under hash h.
func (x *hashIndex) put(h, v uint64) {
	if v == math.MaxUint64 {
		panic("memory: a hashIndex value must be below 2^64-1")
	}
	if 4*(x.n+1) > 3*len(x.slots) {
		old := x.slots
		x.slots = make([]hashSlot, max(16, 2*len(old)))
		for _, sl := range old {
			if sl.v != 0 {
				x.place(sl)
			}
		}
	}
	x.place(hashSlot{hash: h, v: v + 1})
	x.n++
}

// place puts sl in the first free slot from its hash on.
func (x *hashIndex) place(sl hashSlot) {
	mask := uint64(len(x.slots) - 1)
	j := sl.hash & mask
	for x.slots[j].v != 0 {
		j = (j + 1) & mask
	}
	x.slots[j] = sl
}

// remove empties slot j (as find returned it), moving back the slots after it that
// would no longer be found past the gap.
func (x *hashIndex) remove(slot int) {
	mask := uint64(len(x.slots) - 1)
	j := uint64(slot)
	x.slots[j] = hashSlot{}
	x.n--
	for k := (j + 1) & mask; x.slots[k].v != 0; k = (k + 1) & mask {
		// Slot k may move to the gap at j if its hash's first slot is not after j
		// (cyclically, between j and k).
		if home := x.slots[k].hash & mask; (k-home)&mask >= (k-j)&mask {
			x.slots[j], x.slots[k] = x.slots[k], hashSlot{}
			j = k
		}
	}
}

// names numbers distinct strings in the order they were added (0, 1, 2, ...) and finds
// a string's number. The strings are kept back to back in one byte array, each between
// its length and its number, and indexed by their hashes in a [hashIndex] of their
// offsets, so that a million names cost the collector nothing to scan, and finding a
// name reads one slot of the index and one place of the array. A name's offset is how
// its owner gets it back ([names.at]): records that need their name keep its offset.
// Its zero value is empty and ready to use. It is not safe for concurrent use: its owner
// locks it (reads may run together).
type names struct {
	seed maphash.Seed
	// text holds, per name, its length (uvarint), its bytes and its number (4 bytes);
	// bytes once written never change. Several names may share one text (see
	// [names.share]); a zero names makes its own.
	text  *[]byte
	index hashIndex // the hash of each name -> its offset
	n     uint32    // the number of names
}

// A nameRef is a name's number and the offset of its length in text.
type nameRef struct {
	off uint64
	i   uint32
}

// lookup returns the number and the offset of s, if it was added.
func (ns *names) lookup(s string) (nameRef, bool) {
	if ns.n == 0 {
		return nameRef{}, false
	}
	return ns.lookupHashed(s, maphash.String(ns.seed, s))
}

// lookupHashed is lookup of s, whose hash is h.
func (ns *names) lookupHashed(s string, h uint64) (nameRef, bool) {
	var r nameRef
	_, _, ok := ns.index.find(h, func(off uint64) bool {
		text := *ns.text
		n, k := binary.Uvarint(text[off:])
		if b := text[off+uint64(k):]; n == uint64(len(s)) && string(b[:n]) == s {
			r = nameRef{off: off, i: binary.LittleEndian.Uint32(b[n:])}
			return true
		}
		return false
	})
	return r, ok
}

// add adds s, which the caller has looked up and not found, and returns its number and
// offset.
func (ns *names) add(s string) nameRef {
	if ns.n == 0 {
		ns.seed = maphash.MakeSeed()
	}
	return ns.addHashed(s, maphash.String(ns.seed, s))
}

// addHashed is add of s, whose hash is h.
func (ns *names) addHashed(s string, h uint64) nameRef {
	if ns.n == math.MaxUint32 {
		panic("memory: more than 2^32-1 names in one table")
	}
	if ns.text == nil {
		ns.text = new([]byte)
	}
	text := *ns.text
	r := nameRef{off: uint64(len(text)), i: ns.n}
	ns.n++
	text = binary.AppendUvarint(text, uint64(len(s)))
	text = append(text, s...)
	*ns.text = binary.LittleEndian.AppendUint32(text, r.i)
	ns.index.put(h, r.off)
	return r
}

// remove takes s out of the index, if it was added: lookup finds it no more. Its bytes
// stay in text (strings made from them may still be in use) and its number is not
// given again; the owner rebuilds its tables when enough of them are dead.
func (ns *names) remove(s string) {
	if ns.n == 0 {
		return
	}
	r, ok := ns.lookup(s)
	if !ok {
		return
	}
	_, slot, _ := ns.index.find(maphash.String(ns.seed, s), func(off uint64) bool { return off == r.off })
	ns.index.remove(slot)
}

// intern returns the number and offset of s, adding it if it is new.
func (ns *names) intern(s string) nameRef {
	if r, ok := ns.lookup(s); ok {
		return r
	}
	return ns.add(s)
}

// at returns the name at offset off, without copying it: the string shares the bytes of
// text, which are never written again (a growing text moves to a new array and leaves
// the old one, still referred to by the strings made from it, as it was).
func (ns *names) at(off uint64) string {
	text := *ns.text
	n, k := binary.Uvarint(text[off:])
	if n == 0 {
		return ""
	}
	return unsafe.String(&text[off+uint64(k)], n)
}

// share makes ns and other, both empty, keep their names in one text, in the order
// they are added to either: names added one after the other sit side by side, and are
// read with one cache miss where two texts would take two.
func (ns *names) share(other *names) {
	if ns.n != 0 || other.n != 0 {
		panic("memory: names can share a text only while empty")
	}
	ns.text = new([]byte)
	other.text = ns.text
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
