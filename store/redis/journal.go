package redis

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/journal"
)

// The journal of changes (package journal; docs/redis.md, "Durability"). Each account
// has a journal in its slot: a hash (its epoch and bound, each entry's change and the
// end of its claim) and a sorted set of the entries' ids by their time (see
// lua/lib_journal.lua). The script of each write of management (the key store's, and
// Adjust) records the entry its context carries (journal.From) with its change, so that
// both are made or neither. A claim finds the accounts whose journals hold entries in
// the index of journals: 16 shards (the hash tags of the shards of the index of
// expiring accounts), each a sorted set of "<account>\x00<epoch>" whose score is at
// most the time of the journal's oldest entry. Removal finds an entry's account by
// the entry's id: from the Store's memory of the entries it recorded and claimed, or
// else from the index of ids (one key per entry).
//
// The index of journals is in slots of its own, so a write cannot update it in its
// script. The epoch makes it safe: a write records its entry only when the journal's
// bound (eb) says that the index holds the account under the journal's epoch (ep) at
// the entry's time or earlier, or when the write has just indexed the account under
// that epoch (ZADD LT), which the script otherwise asks it to do first, answering
// stJournal and the epoch. A claim that finds a journal empty deletes it, epoch and
// all, before it takes the account's entry out of the index: a write that indexed the
// account under that epoch is then refused and indexes it under a new one. A claim
// replaces an entry of the index, of another epoch than the journal's or of a score
// that is not its oldest entry's time, in one script on the shard that writes the new
// entry before it removes the old, so that an account whose journal holds entries is
// always in the index at or before their time.

// Interface guards.
var (
	_ journal.KeyStore = (*Store)(nil)
	_ journal.Ledger   = (*Store)(nil)
)

const (
	// journalIdle is how long a journal left without entries keeps its epoch (the
	// next write to the account then needs not index it again); a claim that finds it
	// empty deletes it sooner.
	journalIdle = 10 * time.Minute
	// journalIDTTL is how long the index of ids keeps an entry's account: longer than
	// a relay keeps an entry (journal.RelayOptions.MaxAge, at most 7 days).
	journalIDTTL = 8 * 24 * time.Hour
	// journalScan is the most entries of a shard of the index of journals read at once.
	journalScan = 128
	// journalBatch is the most journals a claim looks at in one pipeline.
	journalBatch = 64
	// journalVisit bounds the journals one claim looks at.
	journalVisit = 1024
	// journalLook bounds the entries of one journal a claim looks at beyond its limit
	// (those other claims hold).
	journalLook = 256
	// journalTries bounds the runs of a write that its account's entry in the index of
	// journals keeps changing under (claims that find its journal empty).
	journalTries = 4
	// journalRemembered bounds the entries whose accounts a Store remembers.
	journalRemembered = 1 << 14
)

// stJournal is the status of a write's script that asks for its account to be indexed
// in the index of journals first; the reply's second element is the epoch.
const stJournal = 10

// The kinds of an account's journal's keys.
const (
	kindJournal   = "jrnl"
	kindJournalAt = "jat"
)

func (a acctKeys) journal() string   { return string(a) + kindJournal }
func (a acctKeys) journalAt() string { return string(a) + kindJournalAt }

// journals returns the name of a shard of the index of journals.
func (s *Store) journals(shard int) string { return s.prefix + ":{" + s.shards[shard] + "}:journals" }

// journalID returns the name of the entry of the index of ids of an entry: its account.
func (s *Store) journalID(id string) string { return s.prefix + ":jid:" + id }

// journalMember returns the member of an account's entry in the index of journals (an
// account id holds no NUL byte).
func journalMember(account, epoch string) string { return account + "\x00" + epoch }

// journalAccounts remembers the accounts of the entries a Store recorded and claimed,
// so that their removal needs not look them up; at most journalRemembered of them.
type journalAccounts struct {
	mu sync.Mutex
	m  map[string]string
}

func (j *journalAccounts) put(id, account string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m == nil || len(j.m) >= journalRemembered {
		j.m = make(map[string]string)
	}
	j.m[id] = account
}

func (j *journalAccounts) get(id string) (string, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	a, ok := j.m[id]
	return a, ok
}

func (j *journalAccounts) drop(ids []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range ids {
		delete(j.m, id)
	}
}

// A journalWrite is the journal's part of a write of an account: the entry its
// context carries (nil for none), and the epoch under which the write indexed the
// account.
type journalWrite struct {
	s       *Store
	account string
	entry   *journal.Entry
	claim   string
}

// journalWrite returns the journal's part of a write of account that records e (nil
// for none: the write's context carries no entry).
func (s *Store) journalWrite(account string, e *journal.Entry) *journalWrite {
	return &journalWrite{s: s, account: account, entry: e}
}

// run runs the write's script, with the keys of the account's journal after keys and
// the entry's arguments after args (see lua/lib_journal.lua). When the script asks for
// the account to be indexed first (stJournal), it indexes it and runs the script again.
// The first run goes in one pipeline with the entry's entry in the index of ids. Each
// run, and each indexing, waits for the replicas with Options.Replicas (see
// [Store.write]). It returns the script's reply.
func (w *journalWrite) run(ctx context.Context, sc *goredis.Script, keys []string, args ...any) (any, error) {
	a := w.s.account(w.account)
	keys = append(keys[:len(keys):len(keys)], a.journal(), a.journalAt())
	for try := 1; ; try++ {
		all := append(args[:len(args):len(args)], w.args()...)
		var reply any
		var err error
		if try == 1 && w.entry != nil {
			rs, _ := w.s.pipeline(ctx, "", []scriptCall{
				{args: []any{"set", w.s.journalID(w.entry.ID), w.account, "px", journalIDTTL.Milliseconds()}},
				{sc: sc, keys: keys, args: all},
			})
			reply, err = rs[1].val, rs[1].err
		} else {
			reply, err = w.s.write(ctx, sc, keys, all...)
		}
		if err != nil {
			return nil, err
		}
		r := asSlice(reply)
		if len(r) != 2 || asInt(r[0]) != stJournal {
			if w.entry != nil {
				w.s.journaled.put(w.entry.ID, w.account)
			}
			return reply, nil
		}
		if try == journalTries {
			return nil, errors.New("the entry of the account's journal in its index keeps changing")
		}
		// With Options.Replicas, the index's entry waits for the replicas too, so that
		// a failover that keeps the journal's entry keeps the index's.
		w.claim = asString(r[1])
		_, err = w.s.writeCmd(ctx, "zadd", w.s.journals(w.s.shardOf(w.account)), "lt",
			w.entry.At.UnixMicro(), journalMember(w.account, w.claim))
		if err != nil {
			return nil, err
		}
	}
}

// args returns the entry's arguments of the write's script.
func (w *journalWrite) args() []any {
	if w.entry == nil {
		return []any{"", "", "", "", "", ""}
	}
	return []any{w.entry.ID, w.entry.At.UnixMicro(), w.entry.Change, w.claim, newToken(), journalIdle.Milliseconds()}
}

// A journalCandidate is an entry a claim may take.
type journalCandidate struct {
	account, id string
	at          int64 // Unix µs
}

// A journalMemberRead is an entry of the index of journals, read.
type journalMemberRead struct {
	shard  int
	member string
	score  float64
}

// Claim holds and returns the entries of the journal that a relay may publish (see
// [journal.Store]). It reads the entries of the shards of the index of journals below
// before, oldest first, a page at a time (one pipeline for every shard), looks at
// their journals a batch at a time (one script each, in one pipeline), which list
// their entries that no claim holds, until no journal left can hold an entry older
// than the limit-th found, and then claims the oldest (one script for each journal,
// in one pipeline): an entry another claim took meanwhile is left out, so that it
// returns fewer. It looks at 1,024 journals at most, and tidies the index as it goes
// (see the comment at the top of journal.go).
func (s *Store) Claim(ctx context.Context, before, now time.Time, lease time.Duration, limit int) ([]journal.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := journal.CheckClaim(lease, limit); err != nil {
		return nil, err
	}
	c := journalClaim{s: s, before: before.UnixMicro(), now: now.UnixMicro(), limit: limit,
		scans: make([]journalScanState, sweepShards), seen: map[string]bool{}, tidy: map[int][]any{}}
	if err := c.find(ctx); err != nil {
		return nil, fail(ctx, err, "claiming entries of the journal")
	}
	es, err := c.take(ctx, now.Add(lease).UnixMicro())
	if err != nil {
		return nil, fail(ctx, err, "claiming entries of the journal")
	}
	return es, nil
}

// A journalClaim is one call of Claim.
type journalClaim struct {
	s           *Store
	before, now int64 // Unix µs
	limit       int
	scans       []journalScanState
	pending     []journalMemberRead // read and not looked at, by score
	seen        map[string]bool     // the accounts whose journals were looked at
	found       []journalCandidate  // the oldest entries found, at most limit
	tidy        map[int][]any       // the index's entries to replace, by shard (reindex.lua)
}

// A journalScanState is how far a claim read a shard of the index of journals.
type journalScanState struct {
	read int64   // entries read
	more bool    // the last page was full
	last float64 // the score of the last entry read
}

// find finds the oldest entries that no claim holds, at most the limit.
func (c *journalClaim) find(ctx context.Context) error {
	all := make([]int, sweepShards)
	for i := range all {
		all[i] = i
	}
	if err := c.read(ctx, all); err != nil {
		return err
	}
	for visited := 0; visited < journalVisit; {
		// The entries not read yet are at or above the last read of their shard.
		bound, from := math.Inf(1), []int(nil)
		for i, sc := range c.scans {
			switch {
			case !sc.more || sc.last > bound:
			case sc.last < bound:
				bound, from = sc.last, []int{i}
			default:
				from = append(from, i)
			}
		}
		next := bound
		if len(c.pending) > 0 {
			next = min(next, c.pending[0].score)
		}
		if math.IsInf(next, 1) || len(c.found) == c.limit && next > float64(c.found[c.limit-1].at) {
			return nil
		}
		n := 0
		for n < len(c.pending) && n < journalBatch && n < journalVisit-visited && c.pending[n].score <= bound {
			n++
		}
		if n == 0 {
			if err := c.read(ctx, from); err != nil {
				return err
			}
			continue
		}
		batch := c.pending[:n]
		c.pending = c.pending[n:]
		visited += n
		if err := c.look(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// read reads the next page of each of the shards, below before.
func (c *journalClaim) read(ctx context.Context, shards []int) error {
	page := int64(cmp.Or(c.s.jscan, journalScan))
	cmds := make([]*goredis.ZSliceCmd, len(shards))
	_, err := c.s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, sh := range shards {
			cmds[i] = p.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{Key: c.s.journals(sh), Start: "-inf",
				Stop: "(" + strconv.FormatInt(c.before, 10), ByScore: true, Offset: c.scans[sh].read, Count: page})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, sh := range shards {
		zs := cmds[i].Val()
		sc := &c.scans[sh]
		sc.read += int64(len(zs))
		sc.more = int64(len(zs)) == page
		for _, z := range zs {
			m, _ := z.Member.(string)
			c.pending = append(c.pending, journalMemberRead{shard: sh, member: m, score: z.Score})
			sc.last = z.Score
		}
	}
	slices.SortFunc(c.pending, func(a, b journalMemberRead) int {
		return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.member, b.member))
	})
	return nil
}

// look looks at the journals of a batch of entries of the index, and keeps the oldest
// entries found.
func (c *journalClaim) look(ctx context.Context, batch []journalMemberRead) error {
	calls := make([]scriptCall, len(batch))
	accounts := make([]string, len(batch))
	for i, m := range batch {
		account, epoch := parseEntry(m.member)
		accounts[i] = account
		a := c.s.account(account)
		calls[i] = scriptCall{sc: journalPeekScript, keys: []string{a.journal(), a.journalAt()},
			args: []any{epoch, strconv.FormatFloat(m.score, 'f', -1, 64), c.before, c.now, c.limit, c.limit + journalLook, newToken()}}
	}
	replies, _ := c.s.pipeline(ctx, "", calls)
	for i, m := range batch {
		if replies[i].err != nil {
			return replies[i].err
		}
		r := asSlice(replies[i].val)
		switch {
		case len(r) == 1 && asInt(r[0]) == 0:
			c.tidy[m.shard] = append(c.tidy[m.shard], m.member, "", "")
			continue
		case len(r) < 3 || len(r)%2 != 1 || asInt(r[0]) != 1:
			return errReply("the journal of account "+strconv.Quote(accounts[i]), replies[i].val)
		}
		if ep := asString(r[1]); ep != "" {
			c.tidy[m.shard] = append(c.tidy[m.shard], m.member, journalMember(accounts[i], ep), asString(r[2]))
		}
		if c.seen[accounts[i]] {
			continue // its journal's other entry in the index was looked at
		}
		c.seen[accounts[i]] = true
		for j := 3; j+1 < len(r); j += 2 {
			at, err := strconv.ParseFloat(asString(r[j+1]), 64)
			if err != nil {
				return errReply("the journal of account "+strconv.Quote(accounts[i]), replies[i].val)
			}
			c.found = append(c.found, journalCandidate{account: accounts[i], id: asString(r[j]), at: int64(at)})
		}
	}
	slices.SortFunc(c.found, func(a, b journalCandidate) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id)) })
	c.found = c.found[:min(len(c.found), c.limit)]
	return nil
}

// take claims the entries found until until (Unix µs), and tidies the index, in one
// pipeline, and returns the entries it claimed, oldest first.
func (c *journalClaim) take(ctx context.Context, until int64) ([]journal.Entry, error) {
	var calls []scriptCall
	var accounts []string
	ids := map[string][]any{}
	for _, f := range c.found {
		if _, ok := ids[f.account]; !ok {
			accounts = append(accounts, f.account)
		}
		ids[f.account] = append(ids[f.account], f.id)
	}
	for _, account := range accounts {
		a := c.s.account(account)
		calls = append(calls, scriptCall{sc: journalClaimScript, keys: []string{a.journal(), a.journalAt()},
			args: append([]any{c.now, until}, ids[account]...)})
	}
	for shard, args := range c.tidy {
		calls = append(calls, scriptCall{sc: reindexScript, keys: []string{c.s.journals(shard)}, args: args})
	}
	es := []journal.Entry{}
	if len(calls) == 0 {
		return es, nil
	}
	// The index is tidied at best: an entry left is tidied by a later claim.
	replies, _ := c.s.pipeline(ctx, "", calls)
	for i, account := range accounts {
		if replies[i].err != nil {
			return nil, replies[i].err
		}
		r := asSlice(replies[i].val)
		if len(r)%3 != 0 {
			return nil, errReply("claiming the journal of account "+strconv.Quote(account), replies[i].val)
		}
		for j := 0; j < len(r); j += 3 {
			at, err := strconv.ParseFloat(asString(r[j+1]), 64)
			if err != nil {
				return nil, errReply("claiming the journal of account "+strconv.Quote(account), replies[i].val)
			}
			e := journal.Entry{ID: asString(r[j]), At: time.UnixMicro(int64(at)).UTC(), Change: []byte(asString(r[j+2]))}
			c.s.journaled.put(e.ID, account)
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b journal.Entry) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	return es, nil
}

// Remove deletes entries of the journal (see [journal.Store]): it finds their
// accounts (remembered by the Store, or else read from the index of ids, in one
// pipeline), then removes each account's entries in one script and their entries of
// the index of ids, in one pipeline.
func (s *Store) Remove(ctx context.Context, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	byAccount := map[string][]any{}
	var order []string
	add := func(account, id string) {
		if _, ok := byAccount[account]; !ok {
			order = append(order, account)
		}
		byAccount[account] = append(byAccount[account], id)
	}
	var unknown []string
	for _, id := range ids {
		if a, ok := s.journaled.get(id); ok {
			add(a, id)
		} else {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		cmds := make([]*goredis.StringCmd, len(unknown))
		_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, id := range unknown {
				cmds[i] = p.Get(ctx, s.journalID(id))
			}
			return nil
		})
		if err != nil && !errors.Is(err, goredis.Nil) {
			return fail(ctx, err, "finding entries of the journal")
		}
		for i, id := range unknown {
			if a, err := cmds[i].Result(); err == nil {
				add(a, id)
			}
		}
	}
	calls := make([]scriptCall, 0, len(order)+len(ids))
	for _, account := range order {
		a := s.account(account)
		calls = append(calls, scriptCall{sc: journalRemoveScript, keys: []string{a.journal(), a.journalAt()},
			args: append([]any{journalIdle.Milliseconds()}, byAccount[account]...)})
	}
	for _, id := range ids {
		calls = append(calls, scriptCall{args: []any{"unlink", s.journalID(id)}})
	}
	replies, _ := s.pipeline(ctx, "", calls)
	for _, r := range replies[:len(order)] {
		if r.err != nil {
			return fail(ctx, r.err, "removing entries of the journal")
		}
	}
	s.journaled.drop(ids)
	return nil
}
