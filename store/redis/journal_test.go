package redis_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// The tests of the journal beyond storetest's suites (KeyJournal, LedgerJournal, which
// TestStore and TestCluster run): how the index of journals is kept and tidied, and
// how a claim reads it.

var jt0 = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// journaledAccount creates an account of its own, recording an entry of id at at.
func journaledAccount(t *testing.T, s *redis.Store, account, id string, at time.Time) auth.Key {
	t.Helper()
	k := auth.Key{ID: "key_" + account, AccountID: account, Name: "primary", Primary: true, Hash: newHash(), CreatedAt: jt0}
	e := journal.Entry{ID: id, At: at, Change: []byte("created " + account)}
	must(t, s.CreateAccount(journal.With(t.Context(), e), auth.Account{ID: account, Plan: "p", CreatedAt: jt0}, k))
	return k
}

// rotated rotates k, recording an entry of id at at.
func rotated(t *testing.T, s *redis.Store, k auth.Key, id string, at time.Time) {
	t.Helper()
	e := journal.Entry{ID: id, At: at, Change: []byte("rotated " + k.ID)}
	_, err := s.RotateKey(journal.With(t.Context(), e), k.ID, auth.AnyRevision, newHash(), at)
	must(t, err)
}

// indexOf returns the entries of the index of journals, "<account>/<score>" (the epoch
// left out), sorted.
func indexOf(t *testing.T, c goredis.UniversalClient, s *redis.Store) []string {
	t.Helper()
	var out []string
	for _, shard := range s.JournalShards() {
		zs, err := c.ZRangeWithScores(t.Context(), shard, 0, -1).Result()
		must(t, err)
		for _, z := range zs {
			account, _, _ := strings.Cut(z.Member.(string), "\x00")
			out = append(out, fmt.Sprintf("%s/%d", account, time.UnixMicro(int64(z.Score)).Sub(jt0)/time.Second))
		}
	}
	slices.Sort(out)
	return out
}

// claimIDs claims every entry made before before, at now, and returns their ids.
func claimIDs(t *testing.T, s *redis.Store, before, now time.Time, limit int) []string {
	t.Helper()
	es, err := s.Claim(t.Context(), before, now, time.Minute, limit)
	must(t, err)
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestJournalIndex checks the index of journals: a journaled write indexes its account
// at the entry's time (at the earliest of its entries); removing every entry leaves the
// journal and its index entry, which a claim deletes once it finds the journal empty;
// a claim that finds the journal's oldest entries removed moves the account's index
// entry up to the oldest left, and replaces an entry of another epoch with the
// journal's; removed entries leave no key of the index of ids.
func TestJournalIndex(t *testing.T) {
	ctx, c := t.Context(), client(t)
	s, prefix := newStorePrefix(t, c, nil)
	sec := func(n int) time.Time { return jt0.Add(time.Duration(n) * time.Second) }

	ka := journaledAccount(t, s, "a", "a1", sec(10))
	rotated(t, s, ka, "a2", sec(20))
	rotated(t, s, ka, "a0", sec(5)) // recorded late: the index moves down to it
	kb := journaledAccount(t, s, "b", "b1", sec(30))
	if got, want := indexOf(t, c, s), []string{"a/5", "b/30"}; !slices.Equal(got, want) {
		t.Fatalf("the index after the writes: %q, want %q", got, want)
	}

	// a's oldest entries removed: a claim moves its index entry up to the one left.
	must(t, s.Remove(ctx, "a0", "a1"))
	if got, want := claimIDs(t, s, sec(15), sec(100), 10), []string(nil); !slices.Equal(got, want) {
		t.Errorf("a claim before 15s took %q, want none", got)
	}
	if got, want := indexOf(t, c, s), []string{"a/20", "b/30"}; !slices.Equal(got, want) {
		t.Errorf("the index after a claim found a's oldest entries removed: %q, want %q", got, want)
	}

	// An entry of another epoch (left by a claim that stopped half-way) is replaced
	// by the journal's.
	must(t, c.ZAdd(ctx, s.JournalShards()[redis.ShardOf(s, "b")], goredis.Z{Score: float64(sec(1).UnixMicro()), Member: "b\x00stale"}).Err())
	if got, want := claimIDs(t, s, sec(100), sec(100), 10), []string{"a2", "b1"}; !slices.Equal(got, want) {
		t.Errorf("a claim took %q, want %q", got, want)
	}
	if got, want := indexOf(t, c, s), []string{"a/20", "b/30"}; !slices.Equal(got, want) {
		t.Errorf("the index after a claim found an entry of another epoch: %q, want %q", got, want)
	}

	// Every entry removed: the journals stay until a claim finds them empty.
	must(t, s.Remove(ctx, "a2", "b1"))
	if got := indexOf(t, c, s); len(got) != 2 {
		t.Errorf("the index after the removals: %q, want both accounts until a claim", got)
	}
	if got := claimIDs(t, s, sec(100), sec(200), 10); len(got) != 0 {
		t.Errorf("a claim of empty journals took %q", got)
	}
	if got := indexOf(t, c, s); len(got) != 0 {
		t.Errorf("the index after a claim found the journals empty: %q, want none", got)
	}
	for _, kind := range []string{"jrnl", "jat"} {
		for _, account := range []string{"a", "b"} {
			if n, err := c.Exists(ctx, prefix+":{"+account+"}:"+kind).Result(); err != nil || n != 0 {
				t.Errorf("the journal's %s of %s after a claim found it empty: %d (%v), want deleted", kind, account, n, err)
			}
		}
	}
	if keys, err := c.Keys(ctx, prefix+":jid:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("the index of ids after the removals: %q (%v), want empty", keys, err)
	}

	// The next write indexes its account again.
	rotated(t, s, kb, "b2", sec(40))
	if got, want := claimIDs(t, s, sec(100), sec(300), 10), []string{"b2"}; !slices.Equal(got, want) {
		t.Errorf("a claim after a write to a deleted journal took %q, want %q", got, want)
	}
}

// racingClaims is a go-redis hook that runs a claim of its store right after each of
// the first n commands that write the index of journals (a write indexing its
// account), before the write's script runs again.
type racingClaims struct {
	s       *redis.Store
	left    atomic.Int64
	claimed atomic.Int64
}

func (r *racingClaims) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *racingClaims) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if name, keys := keysOf(cmd.Args()); name == "zadd" && strings.HasSuffix(keys[0], ":journals") && r.left.Add(-1) >= 0 {
			// The claim finds the journal empty and deletes it, with its epoch, and
			// the entry of the index the write just made.
			es, cerr := r.s.Claim(context.WithoutCancel(ctx), jt0.Add(time.Hour), jt0.Add(time.Hour), time.Minute, 10)
			if cerr != nil {
				return cerr
			}
			r.claimed.Add(int64(len(es)))
		}
		return err
	}
}

func (r *racingClaims) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// TestJournalClaimRacesWrite checks that a write whose account's journal a claim deletes
// while the write indexes it (after the index holds it and before its script records
// its entry) records its entry where claims find it: its script refuses the epoch the
// claim deleted, and the write indexes the account again.
func TestJournalClaimRacesWrite(t *testing.T) {
	for _, races := range []int64{1, 2} {
		t.Run(fmt.Sprintf("%d claims", races), func(t *testing.T) {
			c := newClient(addr(t), nil)
			t.Cleanup(func() { c.Close() })
			s, prefix := newStorePrefix(t, c, nil)
			race := &racingClaims{s: openStore(t, c, prefix, nil)}
			k := journaledAccount(t, s, "acme", "created", jt0)
			must(t, s.Remove(t.Context(), "created"))
			if got := claimIDs(t, s, jt0.Add(time.Hour), jt0.Add(time.Hour), 10); len(got) != 0 {
				t.Fatalf("a claim took %q from an empty journal", got)
			}
			c.AddHook(race)
			race.left.Store(races)
			rotated(t, s, k, "rotated", jt0.Add(time.Second))
			if n := race.left.Load(); n > 0 {
				t.Fatalf("%d racing claims did not run: the write did not index its account", n)
			}
			if n := race.claimed.Load(); n != 0 {
				t.Errorf("the racing claims took %d entries, want none (the entry is not recorded yet)", n)
			}
			if got, want := claimIDs(t, s, jt0.Add(time.Hour), jt0.Add(2*time.Hour), 10), []string{"rotated"}; !slices.Equal(got, want) {
				t.Errorf("a claim after the write took %q, want %q: the entry is out of the index", got, want)
			}
		})
	}
}

// TestJournalClaimPages checks a claim that reads the shards of the index a page at a
// time (pages of 2 entries here) and looks at more journals than a page: the claims of
// a relay take every entry once, oldest first, across accounts and shards; claims that
// remove nothing skip the entries other claims hold.
func TestJournalClaimPages(t *testing.T) {
	ctx, c := t.Context(), client(t)
	s, _ := newStorePrefix(t, c, nil)
	s.SetJournalScan(2)
	const accounts = 120
	var want []string
	for i := range accounts {
		// Created out of the order of their entries, two entries each.
		n := i * 7 % accounts
		id := fmt.Sprintf("acct-%03d", n)
		k := journaledAccount(t, s, id, fmt.Sprintf("e%03d-0", n), jt0.Add(time.Duration(n)*time.Second))
		rotated(t, s, k, fmt.Sprintf("e%03d-1", n), jt0.Add(time.Duration(accounts+n)*time.Second))
	}
	for half := range 2 {
		for n := range accounts {
			want = append(want, fmt.Sprintf("e%03d-%d", n, half))
		}
	}
	now := jt0.Add(time.Hour)

	// Claims that hold what they take: each takes the oldest no other holds.
	var held []string
	for range 3 {
		held = append(held, claimIDs(t, s, now, now, 7)...)
	}
	if !slices.Equal(held, want[:21]) {
		t.Errorf("three claims of 7 took %q, want %q", held, want[:21])
	}

	// A relay's round: claim, remove, until a claim takes fewer than its limit.
	var got []string
	later := now.Add(2 * time.Minute) // the claims above have ended
	for {
		ids := claimIDs(t, s, now, later, 25)
		got = append(got, ids...)
		must(t, s.Remove(ctx, ids...))
		if len(ids) < 25 {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the relay's claims took %d entries %q..., want the %d, oldest first", len(got), got[:min(len(got), 10)], len(want))
	}
}

// TestJournalRemoveElsewhere checks that an entry is removed by a Store that neither
// recorded nor claimed it (another instance's, found through the index of ids), and by
// the Store that recorded it once the index of ids has lost it.
func TestJournalRemoveElsewhere(t *testing.T) {
	ctx, c := t.Context(), client(t)
	s, prefix := newStorePrefix(t, c, nil)
	other := openStore(t, c, prefix, nil)
	journaledAccount(t, s, "a", "a1", jt0)
	journaledAccount(t, s, "b", "b1", jt0)
	must(t, other.Remove(ctx, "a1"))
	must(t, c.Del(ctx, prefix+":jid:b1").Err())
	must(t, s.Remove(ctx, "b1"))
	if got := claimIDs(t, s, jt0.Add(time.Hour), jt0.Add(time.Hour), 10); len(got) != 0 {
		t.Errorf("a claim after the removals took %q, want none", got)
	}
}

// BenchmarkJournalClaim measures a relay's use of the journal: a claim that finds
// nothing due (a relay's round on an idle deployment: one round trip), and the claim
// and removal of 100 entries of 100 accounts (a page of a relay's round after an
// outage).
//
//	TOLLGATE_TEST_REDIS=127.0.0.1:6379 go test -run '^$' -bench JournalClaim ./store/redis/
func BenchmarkJournalClaim(b *testing.B) {
	c := client(b)
	b.Run("nothing-due", func(b *testing.B) {
		s := newStoreOn(b, c, nil)
		for b.Loop() {
			if es, err := s.Claim(b.Context(), jt0, jt0, time.Minute, 100); err != nil || len(es) != 0 {
				b.Fatalf("Claim: %d, %v", len(es), err)
			}
		}
	})
	b.Run("claim-remove-100", func(b *testing.B) {
		s := newStoreOn(b, c, nil)
		keys := make([]auth.Key, 100)
		for i := range keys {
			id := fmt.Sprintf("acct-%03d", i)
			keys[i] = auth.Key{ID: "key_" + id, AccountID: id, Name: "primary", Primary: true, Hash: newHash(), CreatedAt: jt0}
			if err := s.CreateAccount(b.Context(), auth.Account{ID: id, Plan: "p", CreatedAt: jt0}, keys[i]); err != nil {
				b.Fatal(err)
			}
		}
		n := 0
		for b.Loop() {
			b.StopTimer()
			for _, k := range keys {
				n++
				e := journal.Entry{ID: fmt.Sprint("e", n), At: jt0.Add(time.Duration(n)), Change: []byte("rotated")}
				if _, err := s.RotateKey(journal.With(b.Context(), e), k.ID, auth.AnyRevision, newHash(), jt0); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			now := jt0.Add(time.Hour)
			es, err := s.Claim(b.Context(), now, now, time.Minute, 100)
			if err != nil || len(es) != 100 {
				b.Fatalf("Claim: %d, %v", len(es), err)
			}
			ids := make([]string, len(es))
			for i, e := range es {
				ids[i] = e.ID
			}
			if err := s.Remove(b.Context(), ids...); err != nil {
				b.Fatal(err)
			}
		}
	})
}
