package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// sweepShards is the number of shards of the index of expiring accounts. An account's
// entries live in one shard, chosen by a hash of its id; each shard is a sorted set
// with a hash tag of its own, the shards spread evenly over the Cluster's slots, so
// that no single key is written by every account's first reservation after a sweep,
// and sweeps of several instances take different shards.
const sweepShards = 16

// sweepLease is how long a sweep's claim of a shard lasts unless renewed: a sweep
// renews it with every page it reads, and gives it up when it is done. A sweeper that
// dies holding it leaves the shard to the others this long at most.
const sweepLease = 10 * time.Second

// sweepPage is the number of entries of a shard a sweep reads at once.
const sweepPage = 256

// fnv32 is FNV-1a of s.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// shardOf returns the shard of the index of expiring accounts that holds an account's
// entries.
func (s *Store) shardOf(account string) int { return int(fnv32(account) % sweepShards) }

// expiring returns the name of a shard of the index of expiring accounts.
func (s *Store) expiring(shard int) string { return s.prefix + ":{" + s.shards[shard] + "}:expiring" }

// sweeping returns the name of a shard's lease, in the shard's slot.
func (s *Store) sweeping(shard int) string { return s.prefix + ":{" + s.shards[shard] + "}:sweeping" }

// legacyExpiring is the index of expiring accounts of earlier versions, one sorted set
// outside every slot of an account: sweeps still read it, so that the entries written
// before an upgrade find their reservations, and move them to their shards.
func (s *Store) legacyExpiring() string { return s.prefix + ":expiring" }

// shardTags returns the hash tags of the shards: "~x" and a number (no account's tag,
// which begins with '~' only when hexadecimal follows), the first whose Cluster slot
// falls in the shard's sixteenth of the slots, so that a Cluster's masters, which hold
// ranges of slots, share the shards evenly.
func shardTags() []string {
	tags := make([]string, sweepShards)
	const width = 16384 / sweepShards
	for i := range tags {
		for n := 0; ; n++ {
			tag := "~x" + strconv.Itoa(n)
			if int(crc16(tag))%16384/width == i {
				tags[i] = tag
				break
			}
		}
	}
	return tags
}

// crc16 is the CRC-16/XMODEM of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// newToken returns the token that names a Store's sweeps in the leases of the shards.
func newToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Sweep voids up to limit reservations past their deadline at now (on the server's
// clock unless Options.CallerClock), of any accounts, and returns how many it voided;
// it voids fewer than limit only when it found no more, but for the shards another
// instance's sweep holds.
//
// It first reads, in one pipeline, whether each shard of the index of expiring
// accounts (and the index of earlier versions) has an entry whose score has passed:
// when nothing is due, that is the whole sweep. Then, for each shard that has, it
// claims the shard's lease (a shard another instance holds is left to it) and reads
// its due entries a page at a time; for each page it voids the accounts' due
// reservations, one script of each account's in one pipeline, and then replaces the
// page's entries in one script: each with one at the account's earliest deadline left,
// or none when the account has no open reservation left (every reservation settled).
// Concurrent sweeps void each reservation once: the void runs in the account's script,
// atomically with every admission and closing. A sweep looks at an account at most
// twice once it finds no more due reservations there, so that entries it cannot move
// past now (the account's clock behind the index's, on a Cluster) do not keep it busy.
func (s *Store) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	w := &sweep{s: s, limit: limit, visits: map[string]int{}}
	w.mode, w.sec, w.nsec = s.clock(now)
	calls := make([]scriptCall, sweepShards+1)
	for i := range sweepShards {
		calls[i] = scriptCall{sc: dueScript, keys: []string{s.expiring(i)}, args: []any{w.mode, w.sec, w.nsec, 1}}
	}
	calls[sweepShards] = scriptCall{sc: dueScript, keys: []string{s.legacyExpiring()}, args: []any{w.mode, w.sec, w.nsec, 1}}
	due := s.pipelineRuns(ctx, calls, false)
	// Instances start at different shards, so that they seldom meet.
	first := int(fnv32(s.token))
	for k := range len(due) {
		i := (first + k) % len(due)
		if due[i].err != nil {
			return w.total, fail(ctx, due[i].err, "sweep of expired reservations")
		}
		if len(asSlice(due[i].val)) == 0 {
			continue
		}
		if err := w.shard(ctx, i); err != nil {
			return w.total, fail(ctx, err, "sweep of expired reservations")
		}
		if w.total >= limit {
			break
		}
	}
	return w.total, nil
}

// A sweep is one call of Sweep.
type sweep struct {
	s            *Store
	mode         string
	sec, nsec    int64
	limit, total int
	visits       map[string]int // accounts found with no more due reservations
}

// shard sweeps shard i (sweepShards: the index of earlier versions) until it holds no
// due entry, the sweep has voided its limit, or another sweeper holds the shard. It
// gives the shard's lease up when the shard holds no more due entries; a sweep that
// stops at its limit keeps it, so that the next sweep of this Store, which the Service
// runs at once, goes on where it stopped while other instances take other shards.
func (w *sweep) shard(ctx context.Context, i int) error {
	s := w.s
	legacy := i == sweepShards
	for w.total < w.limit {
		var reply any
		var err error
		if legacy {
			reply, err = s.run(ctx, dueScript, []string{s.legacyExpiring()}, w.mode, w.sec, w.nsec, sweepPage)
		} else {
			reply, err = s.run(ctx, sweepClaimScript, []string{s.expiring(i), s.sweeping(i)},
				w.mode, w.sec, w.nsec, sweepPage, s.token, sweepLease.Milliseconds())
		}
		if err == goredis.Nil {
			return nil // another sweeper holds the shard
		}
		if err != nil {
			return err
		}
		again, err := w.page(ctx, i, asSlice(reply))
		if err != nil {
			return err
		}
		if !again {
			if !legacy {
				_, err = s.run(ctx, delIfScript, []string{s.sweeping(i)}, s.token)
			}
			return err
		}
	}
	return nil
}

// page voids the due reservations of the accounts of a page of entries of shard i (see
// [Store.Sweep]) and replaces the entries. The reservations it may void are shared out
// among the entries, so that the sweep never voids more than its limit: an account
// given fewer than it has due keeps an entry that is due still. It reports whether the
// shard may hold more due entries.
func (w *sweep) page(ctx context.Context, i int, entries []any) (bool, error) {
	s := w.s
	found := make([]string, 0, len(entries))
	for _, e := range entries {
		if entry := asString(e); w.visits[entryAccount(entry)] < 2 {
			found = append(found, entry)
		}
	}
	if len(found) == 0 {
		return false, nil
	}
	left := w.limit - w.total
	caps := make([]int, len(found))
	voids := make([]scriptCall, len(found))
	for j, entry := range found {
		caps[j] = left / len(found)
		if j < left%len(found) {
			caps[j]++
		}
		account, epoch := parseEntry(entry)
		a := s.account(account)
		voids[j] = scriptCall{sc: voidScript, keys: []string{a.open(), a.balance(), a.usage()},
			args: []any{w.mode, w.sec, w.nsec, caps[j], a.markers(), s.open, epoch}}
	}
	replies := s.pipelineRuns(ctx, voids, false)
	again := len(entries) == sweepPage
	byShard := map[int][]any{} // the replacing entries' arguments to reindexScript, by shard
	for j, entry := range found {
		if replies[j].err != nil {
			return false, replies[j].err
		}
		r := asSlice(replies[j].val)
		if len(r) != 3 {
			return false, errReply("sweep of account "+strconv.Quote(entryAccount(entry)), replies[j].val)
		}
		account, n, next := entryAccount(entry), int(asInt(r[0])), asString(r[1])
		w.total += n
		if n < caps[j] {
			w.visits[account]++
		} else if next != "" {
			again = true // it may have more due
		}
		shard, was := i, entry
		if i == sweepShards { // an entry of the earlier index moves to its shard
			shard, was = s.shardOf(account), ""
		}
		byShard[shard] = append(byShard[shard], was, indexEntry(account, asString(r[2])), next)
	}
	reindex := make([]scriptCall, 0, len(byShard))
	for shard, args := range byShard {
		reindex = append(reindex, scriptCall{sc: reindexScript, keys: []string{s.expiring(shard)}, args: args})
	}
	replies = s.pipelineRuns(ctx, reindex, false)
	for _, r := range replies {
		if r.err != nil {
			return false, r.err
		}
	}
	if i == sweepShards {
		// Removed only once the entries that replace them are written.
		if err := s.c.ZRem(ctx, s.legacyExpiring(), anySlice(found)...).Err(); err != nil {
			return false, err
		}
	}
	return again, nil
}

// entryAccount returns the account of an entry of the index of expiring accounts.
func entryAccount(entry string) string {
	account, _ := parseEntry(entry)
	return account
}
