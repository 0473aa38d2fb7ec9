package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
)

// The index of expiries is one sorted set, every member at score 0, so that ZRANGE
// BYLEX reads it in the order of its members, byte-wise: each member is an expiry,
// "<instant><key id>\0<account>\0<kind>", where the instant is the expiry to the
// microsecond in 18 digits (12 of Unix seconds, 6 of microseconds; an expiry before
// 1970 counts as 1970), so that the order of the members is the listing's (the
// instant, then the key id: an id holds no NUL byte, which ends it). Kind "k" is a
// key's own expiry, kind "a" its account's, which applies to the primary key. It is a
// global key, outside any account's slot, used only by commands of one key.
//
// The index is written before the record (a key's or an account's), so that a record
// is never without its entry; an entry is left when the record's change is refused or
// later replaced: the listing reads each entry's record, lists only what it says, and
// deletes the entries that no longer match it, as it passes them. PruneKeys and
// DeleteAccount delete the entries of the keys they delete.
func (s *Store) expiries() string { return s.prefix + ":expiries" }

// The kinds of the entries of the index of expiries.
const (
	ownExpiry     = "k"
	accountExpiry = "a"
)

// instantLen is the length of the instant that begins a member of the index of
// expiries.
const instantLen = 18

// expiryInstant returns the instant of a member of the index of expiries.
func expiryInstant(t time.Time) string {
	t = auth.Micro(t)
	sec, us := t.Unix(), t.Nanosecond()/1000
	if sec < 0 {
		sec, us = 0, 0
	}
	return fmt.Sprintf("%012d%06d", sec, us)
}

// expiryMember returns the member of the index of expiries of key id (of account) at
// t, of kind.
func expiryMember(t time.Time, id, account, kind string) string {
	return expiryInstant(t) + id + "\x00" + account + "\x00" + kind
}

// An expiryEntry is a member of the index of expiries, read.
type expiryEntry struct {
	member, key, account, kind string
	at                         time.Time
}

// parseExpiry reads a member of the index of expiries.
func parseExpiry(m string) (expiryEntry, bool) {
	if len(m) < instantLen {
		return expiryEntry{}, false
	}
	sec, err1 := strconv.ParseInt(m[:12], 10, 64)
	us, err2 := strconv.ParseInt(m[12:instantLen], 10, 64)
	parts := strings.Split(m[instantLen:], "\x00")
	if err1 != nil || err2 != nil || len(parts) != 3 {
		return expiryEntry{}, false
	}
	return expiryEntry{member: m, key: parts[0], account: parts[1], kind: parts[2],
		at: time.Unix(sec, us*1000).UTC()}, true
}

// keyInstantOf returns what begins the members of the index of expiries of one key
// at one instant: the instant, the key id and the NUL that ends it; the whole member
// if it is malformed.
func keyInstantOf(m string) string {
	if len(m) < instantLen {
		return m
	}
	if i := strings.IndexByte(m[instantLen:], 0); i >= 0 {
		return m[:instantLen+i+1]
	}
	return m
}

// sameKeyInstant reports whether two members of the index of expiries are of one key
// at one instant: a primary key's own expiry and its account's, or an entry and
// another a change left behind.
func sameKeyInstant(a, b string) bool {
	ka := keyInstantOf(a)
	return ka != a && ka == keyInstantOf(b)
}

// keyExpiry returns the member of the own expiry of a key, and false if it has none.
func keyExpiry(k *auth.Key) (string, bool) {
	e := k.Restrictions.ExpiresAt()
	if e.IsZero() {
		return "", false
	}
	return expiryMember(e, k.ID, k.AccountID, ownExpiry), true
}

// accountExpiryOf returns the member of the expiry of an account whose primary key is
// primary, and false if it has none.
func accountExpiryOf(a *auth.Account, primary string) (string, bool) {
	e := a.Restrictions.ExpiresAt()
	if e.IsZero() {
		return "", false
	}
	return expiryMember(e, primary, a.ID, accountExpiry), true
}

// indexExpiries adds members to the index of expiries.
func (s *Store) indexExpiries(ctx context.Context, members ...string) error {
	if len(members) == 0 {
		return nil
	}
	args := make([]any, 0, 2+2*len(members))
	args = append(args, "zadd", s.expiries())
	for _, m := range members {
		args = append(args, 0, m)
	}
	if _, err := s.writeCmd(ctx, args...); err != nil {
		return fail(ctx, err, "indexing an expiry")
	}
	return nil
}

// unindexExpiries deletes members from the index of expiries, even if ctx was canceled
// meanwhile; if Redis cannot be reached, they stay, and the listing deletes them when
// it passes them.
func (s *Store) unindexExpiries(ctx context.Context, members ...string) {
	if len(members) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.c.ZRem(ctx, s.expiries(), anySlice(members)...)
}

// ExpiringKeys returns a page of the expiries of keys in q's window (see
// [auth.KeyExpiries]): it reads the entries of the window after the cursor from the
// index of expiries (ZRANGE BYLEX, at most the page's size and one), then the records
// of their keys and accounts in one pipeline, and lists the entries the records bear
// out. A page therefore examines at most its size of entries, and the other entries of
// the key and instant of its last (a primary key's own expiry and its account's, which
// the next page, after that key at that instant, would skip): when some no longer
// match their records, it holds fewer, with Next set to the last examined.
func (s *Store) ExpiringKeys(ctx context.Context, q auth.ExpiryQuery) (auth.ExpiryPage, error) {
	if err := ctx.Err(); err != nil {
		return auth.ExpiryPage{}, err
	}
	q, size, err := q.Check()
	if err != nil {
		return auth.ExpiryPage{}, err
	}
	// \xff begins no key id (valid UTF-8), nor follows a NUL in a member: it bounds
	// the members of an instant, and those of a key id at an instant.
	lo := expiryInstant(q.From) + "\xff"
	if !q.After.IsZero() {
		if c := expiryInstant(q.After.At) + q.After.Key + "\x00\xff"; c > lo {
			lo = c
		}
	}
	hi := expiryInstant(q.To) + "\xff"
	page := auth.ExpiryPage{Expiries: []auth.Expiry{}}
	if lo >= hi {
		return page, nil
	}
	members, err := s.c.ZRangeArgs(ctx, goredis.ZRangeArgs{Key: s.expiries(), Start: "(" + lo, Stop: "(" + hi,
		ByLex: true, Count: int64(size + 1)}).Result()
	if err != nil {
		return auth.ExpiryPage{}, fail(ctx, err, "reading the index of expiries")
	}
	examined := members[:min(size, len(members))]
	if len(members) > size && sameKeyInstant(members[size-1], members[size]) {
		// The page would end between the expiries of one key at one instant (a
		// primary key's own and its account's): the next page, which starts after
		// that key at that instant, would skip the rest. The page examines them all.
		rest, err := s.c.ZRangeArgs(ctx, goredis.ZRangeArgs{Key: s.expiries(), Start: "[" + members[size],
			Stop: "(" + keyInstantOf(members[size]) + "\xff", ByLex: true}).Result()
		if err != nil {
			return auth.ExpiryPage{}, fail(ctx, err, "reading the index of expiries")
		}
		examined = append(examined[:len(examined):len(examined)], rest...)
	}
	entries := make([]expiryEntry, 0, len(examined))
	var malformed []string
	for _, m := range examined {
		e, ok := parseExpiry(m)
		if !ok {
			malformed = append(malformed, m)
			continue
		}
		entries = append(entries, e)
	}
	if len(members) > size {
		if last, ok := parseExpiry(examined[len(examined)-1]); ok {
			page.Next = auth.ExpiryCursor{At: last.at, Key: last.key}
		} else {
			// A malformed member, deleted below: the next page reads again from here.
			page.Next = q.After
			if page.Next.IsZero() {
				page.Next.At = time.Unix(0, 0).UTC()
			}
		}
	}
	listed, stale, err := s.bearOut(ctx, &q, entries)
	if err != nil {
		return auth.ExpiryPage{}, err
	}
	s.unindexExpiries(ctx, append(stale, malformed...)...)
	page.Expiries = listed
	return page, nil
}

// bearOut reads the records of the keys and accounts of entries, in one pipeline, and
// returns the expiries they bear out in q's window, in the order of entries, and the
// members of the entries that no longer match their records (stale).
func (s *Store) bearOut(ctx context.Context, q *auth.ExpiryQuery, entries []expiryEntry) (listed []auth.Expiry, stale []string, err error) {
	listed = []auth.Expiry{}
	if len(entries) == 0 {
		return listed, nil, nil
	}
	fields := make([]*goredis.SliceCmd, len(entries))
	records := make([]*goredis.StringCmd, len(entries))
	_, err = s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, e := range entries {
			a := s.account(e.account)
			fields[i] = p.HMGet(ctx, a.keys(), e.key+":h", e.key+":rec", e.key+":rot", e.key+":rev", e.key+":v")
			records[i] = p.Get(ctx, a.record())
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, nil, fail(ctx, err, "reading the keys of the index of expiries")
	}
	for i, e := range entries {
		f, ferr := fields[i].Result()
		rec, rerr := records[i].Result()
		switch {
		case ferr != nil:
			return nil, nil, fail(ctx, ferr, "reading key %q", e.key)
		case errors.Is(rerr, goredis.Nil) || len(f) != 5 || asString(f[0]) == "":
			stale = append(stale, e.member) // the account or the key was deleted
			continue
		case rerr != nil:
			return nil, nil, fail(ctx, rerr, "reading account %q", e.account)
		}
		k, err := decodeKey(e.key, e.account, asString(f[0]), asString(f[1]), asString(f[2]), asString(f[3]), asString(f[4]))
		if err != nil {
			return nil, nil, err
		}
		a, err := decodeAccount(e.account, rec)
		if err != nil {
			return nil, nil, err
		}
		own, acct := auth.Micro(k.Restrictions.ExpiresAt()), auth.Micro(a.Restrictions.ExpiresAt())
		at := auth.ExpiryOf(&k, a.Restrictions)
		// An entry matches its record if it is of the record's expiry (own or the
		// account's); it stands for the key's expiry if that expiry is the key's.
		var matches, stands bool
		switch e.kind {
		case ownExpiry:
			matches = !own.IsZero() && expiryInstant(own) == e.member[:instantLen]
			stands = at.Equal(own)
		case accountExpiry:
			matches = k.Primary && !acct.IsZero() && expiryInstant(acct) == e.member[:instantLen]
			stands = at.Equal(acct) && (own.IsZero() || acct.Before(own))
		}
		if !matches {
			stale = append(stale, e.member)
			continue
		}
		if !stands {
			continue
		}
		if q.Expires(k.ID, at, k.RevokedAt) {
			listed = append(listed, auth.Expiry{Key: k, At: at})
		}
	}
	return listed, stale, nil
}

// expiriesOfAccount returns the members of the index of expiries of an account and of
// its keys, read from the store.
func (s *Store) expiriesOfAccount(ctx context.Context, id string) ([]string, error) {
	a, err := s.Account(ctx, id)
	if err != nil {
		return nil, err
	}
	var members []string
	q := auth.KeyQuery{Account: id, Limit: auth.MaxKeyPage}
	for {
		page, err := s.Keys(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, k := range page.Keys {
			if m, ok := keyExpiry(&k); ok {
				members = append(members, m)
			}
			if m, ok := accountExpiryOf(&a, k.ID); ok && k.Primary {
				members = append(members, m)
			}
		}
		if q.After = page.Next; q.After == "" {
			return members, nil
		}
	}
}

// primaryOf returns the id of an account's primary key: the first of korder; "" for
// none.
func (s *Store) primaryOf(ctx context.Context, account string) (string, error) {
	id, err := s.c.LIndex(ctx, s.account(account).korder(), 0).Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fail(ctx, err, "reading the primary key of account %q", account)
	}
	return id, nil
}

// expiriesOfRecords returns the members of the index of expiries of the keys whose
// ids and JSON records recs holds (a key id, then its record, ...), of account.
func expiriesOfRecords(account string, recs []any) []string {
	var members []string
	for i := 0; i+1 < len(recs); i += 2 {
		id, rec := asString(recs[i]), asString(recs[i+1])
		k, err := decodeKey(id, account, strings.Repeat("0", 64), rec, "", "", "")
		if err != nil {
			continue
		}
		if m, ok := keyExpiry(&k); ok {
			members = append(members, m)
		}
	}
	return members
}
