package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// TestKeyExpiries checks that a key store's listing of the keys that expire
// ([auth.KeyExpiries]) behaves as its documentation says: newStore returns an empty
// key store that implements it.
func TestKeyExpiries(t *testing.T, newStore func(t *testing.T) auth.KeyStore) {
	t.Helper()
	run(t, newStore, keyExpiryRows)
}

var keyExpiryRows = []behaviour[auth.KeyStore]{
	{"ExpiringKeysWindow",
		"ExpiringKeys lists the keys whose expiry is after From and at or before To, by expiry then key id: a sub-key's own expiry, a primary key's or its account's, whichever is earlier; not the keys that never expire, nor those revoked at or before their expiry (a key revoked after it is listed), each with the key as stored.",
		ekWindow},
	{"ExpiringKeysPaged",
		"ExpiringKeys returns a listing a page at a time, at most Limit expiries (auth.DefaultExpiryPage for 0), in the order of their expiry then of their key ids, also among keys that expire at one instant; Next is the zero cursor at the end, and the pages together hold each expiry once.",
		ekPaged},
	{"ExpiringKeysFollowChanges",
		"ExpiringKeys lists a key at its expiry as it is now: a key whose restrictions were updated at its new expiry (or not at all, without one), a primary key at its account's expiry as UpdateAccount changed it; a key revoked before its expiry, a key pruned and the keys of a deleted account are not listed.",
		ekFollowChanges},
	{"ExpiringKeysMicroseconds",
		"Expiries are compared and returned to the microsecond: an expiry's nanoseconds beyond it are dropped, and a window's bounds are taken to the microsecond too.",
		ekMicroseconds},
	{"ExpiringKeysPrimaryAtItsAccountsInstant",
		"A primary key whose own expiry is its account's instant is listed once, at that instant, whatever the page size: also when a page ends between what the store keeps of its two expiries.",
		ekPrimaryAtItsAccountsInstant},
	{"ExpiringKeysBadQuery",
		"ExpiringKeys of a query without To, with To before From, or with a Limit below 0 or above auth.MaxExpiryPage returns auth.ErrBadExpiryQuery, which wraps store.ErrInvalid; a canceled context is an error matching it.",
		ekBadQuery},
}

// The rows' keys expire in a region of time of their own, each row at its own base,
// far from the expiries of the other suites' keys, and each row keeps only the keys
// of its ids, should the store be shared.
func expiryBase(row int) time.Time { return at(30000*time.Hour + time.Duration(row)*1000*time.Hour) }

// expiries returns s as an auth.KeyExpiries.
func expiries(t *testing.T, s auth.KeyStore) auth.KeyExpiries {
	t.Helper()
	e, ok := s.(auth.KeyExpiries)
	if !ok {
		t.Fatalf("%T does not list the keys that expire (auth.KeyExpiries)", s)
	}
	return e
}

// listExpiries returns the whole listing of q, page by page, of the keys of n only, as
// "<key id>@<offset from base>" strings.
func listExpiries(t *testing.T, s auth.KeyStore, n ids, q auth.ExpiryQuery, base time.Time) []string {
	t.Helper()
	var got []string
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("ExpiringKeys: the listing does not end (cursor %+v)", q.After)
		}
		page, err := expiries(t, s).ExpiringKeys(t.Context(), q)
		must(t, "ExpiringKeys", err)
		size := cmpOr(q.Limit, auth.DefaultExpiryPage)
		if len(page.Expiries) > size {
			t.Fatalf("ExpiringKeys: a page of %d expiries, more than the limit %d", len(page.Expiries), size)
		}
		for _, e := range page.Expiries {
			if strings.HasPrefix(e.Key.ID, n.prefix) {
				got = append(got, fmt.Sprintf("%s@%s", strings.TrimPrefix(e.Key.ID, n.prefix+"-"), e.At.Sub(base)))
			}
		}
		if page.Next.IsZero() {
			return got
		}
		q.After = page.Next
	}
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// expiringIn returns the restrictions that expire at t.
func expiringIn(t *testing.T, e time.Time) auth.Restrictions {
	t.Helper()
	return restrictions(t, auth.RestrictionSpec{ExpiresAt: &e})
}

// expiringAccount stores an account whose restrictions expire at acctExp (never for
// zero), and its primary key, whose own expire at keyExp (never for zero).
func expiringAccount(t *testing.T, s auth.KeyStore, n ids, label string, acctExp, keyExp time.Time) (auth.Account, auth.Key) {
	t.Helper()
	a, k := plainAccount(n, label)
	if !acctExp.IsZero() {
		a.Restrictions = expiringIn(t, acctExp)
	}
	if !keyExp.IsZero() {
		k.Restrictions = expiringIn(t, keyExp)
	}
	must(t, "CreateAccount", s.CreateAccount(t.Context(), a, k))
	return a, k
}

// expiringKey stores a sub-key of acct that expires at e (never for zero).
func expiringKey(t *testing.T, s auth.KeyStore, n ids, acct auth.Account, label string, e time.Time) auth.Key {
	t.Helper()
	k := newKey(n, acct, label, t0)
	if !e.IsZero() {
		k.Restrictions = expiringIn(t, e)
	}
	must(t, "CreateKey", s.CreateKey(t.Context(), k, auth.KeyLimit{}))
	return k
}

func ekWindow(t *testing.T, s auth.KeyStore) {
	n, base := newIDs(), expiryBase(0)
	h := func(d float64) time.Time { return base.Add(time.Duration(d * float64(time.Hour))) }
	a, _ := expiringAccount(t, s, n, "a", h(2), time.Time{}) // the primary, a-primary, expires with its account
	expiringKey(t, s, n, a, "k1", h(1))
	expiringKey(t, s, n, a, "k2", h(2))
	expiringKey(t, s, n, a, "k3", h(3))
	expiringKey(t, s, n, a, "never", time.Time{})
	before := expiringKey(t, s, n, a, "revoked-before", h(1))
	after := expiringKey(t, s, n, a, "revoked-after", h(1))
	at1 := expiringKey(t, s, n, a, "revoked-at", h(1))
	for _, r := range []struct {
		k  auth.Key
		at time.Time
	}{{before, h(0.5)}, {after, h(1.5)}, {at1, h(1)}} {
		_, err := s.RevokeKey(t.Context(), r.k.ID, auth.AnyRevision, r.at)
		must(t, "RevokeKey", err)
	}
	// b-primary expires on its own before its account; c-primary with its account,
	// before its own expiry.
	expiringAccount(t, s, n, "b", h(3), h(1.5))
	expiringAccount(t, s, n, "c", h(2.5), h(2.75))
	expiringAccount(t, s, n, "d", time.Time{}, time.Time{})

	tests := []struct {
		name     string
		from, to time.Time
		want     []string
	}{
		{"all", base, h(10), []string{"k1@1h0m0s", "revoked-after@1h0m0s", "b-primary@1h30m0s", "a-primary@2h0m0s",
			"k2@2h0m0s", "c-primary@2h30m0s", "k3@3h0m0s"}},
		{"from is exclusive, to inclusive", h(1), h(2), []string{"b-primary@1h30m0s", "a-primary@2h0m0s", "k2@2h0m0s"}},
		{"the zero From starts with the earliest", time.Time{}, h(1), []string{"k1@1h0m0s", "revoked-after@1h0m0s"}},
		{"an empty window", h(1), h(1), nil},
		{"none in the window", h(3), h(10), nil},
	}
	for _, tt := range tests {
		got := listExpiries(t, s, n, auth.ExpiryQuery{From: tt.from, To: tt.to}, base)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: ExpiringKeys(%s, %s] = %q, want %q", tt.name, tt.from.Sub(base), tt.to.Sub(base), got, tt.want)
		}
	}
	// The key is as stored.
	page, err := expiries(t, s).ExpiringKeys(t.Context(), auth.ExpiryQuery{From: h(2.9), To: h(3)})
	must(t, "ExpiringKeys", err)
	if len(page.Expiries) != 1 {
		t.Fatalf("ExpiringKeys(2h54m, 3h]: %d expiries, want 1", len(page.Expiries))
	}
	want, err := s.Key(t.Context(), n.id("k3"))
	must(t, "Key", err)
	if d := diffKey(page.Expiries[0].Key, want); d != "" {
		t.Errorf("ExpiringKeys returned k3 unlike Key: %s", d)
	}
	if e := page.Expiries[0].At; !e.Equal(h(3)) || e.Location() != time.UTC {
		t.Errorf("ExpiringKeys: k3 expires at %v, want %v in UTC", e, h(3))
	}
}

func ekPaged(t *testing.T, s auth.KeyStore) {
	n, base := newIDs(), expiryBase(1)
	a, _ := expiringAccount(t, s, n, "a", time.Time{}, time.Time{})
	var want []string
	// Three instants, seven keys at each: the listing orders them by key id.
	for i := range 21 {
		l := i * 8 % 21 // created out of their order
		expiringKey(t, s, n, a, fmt.Sprintf("k%02d", l), base.Add(time.Duration(1+l/7)*time.Hour))
	}
	for i := range 21 {
		want = append(want, fmt.Sprintf("k%02d@%s", i, time.Duration(1+i/7)*time.Hour))
	}
	for _, limit := range []int{0, 1, 2, 5, 7, 21, auth.MaxExpiryPage} {
		got := listExpiries(t, s, n, auth.ExpiryQuery{From: base, To: base.Add(10 * time.Hour), Limit: limit}, base)
		if !slices.Equal(got, want) {
			t.Errorf("pages of %d: %q, want %q", limit, got, want)
		}
	}
	// A full last page ends the listing (Next zero) or is followed by an empty one.
	q := auth.ExpiryQuery{From: base, To: base.Add(10 * time.Hour), Limit: 7}
	for range 3 {
		page, err := expiries(t, s).ExpiringKeys(t.Context(), q)
		must(t, "ExpiringKeys", err)
		if page.Next.IsZero() {
			return
		}
		q.After = page.Next
	}
	page, err := expiries(t, s).ExpiringKeys(t.Context(), q)
	must(t, "ExpiringKeys", err)
	if len(page.Expiries) != 0 || !page.Next.IsZero() {
		t.Errorf("after the last key: %d expiries and Next %+v, want none and the zero cursor", len(page.Expiries), page.Next)
	}
}

func ekFollowChanges(t *testing.T, s auth.KeyStore) {
	n, base := newIDs(), expiryBase(2)
	h := func(d float64) time.Time { return base.Add(time.Duration(d * float64(time.Hour))) }
	ctx := t.Context()
	a, pa := expiringAccount(t, s, n, "a", h(5), time.Time{})
	moved := expiringKey(t, s, n, a, "moved", h(1))
	cleared := expiringKey(t, s, n, a, "cleared", h(1))
	added := expiringKey(t, s, n, a, "added", time.Time{})
	revoked := expiringKey(t, s, n, a, "revoked", h(2))
	pruned := expiringKey(t, s, n, a, "pruned", h(2))
	for _, u := range []struct {
		k auth.Key
		r auth.Restrictions
	}{{moved, expiringIn(t, h(3))}, {cleared, auth.Restrictions{}}, {added, expiringIn(t, h(2))}} {
		_, err := s.UpdateKey(ctx, auth.KeyUpdate{ID: u.k.ID, Name: u.k.Name, Restrictions: u.r, Revision: u.k.Revision})
		must(t, "UpdateKey", err)
	}
	// The primary key gets an expiry of its own, later than its account's: it still
	// expires with its account, whose expiry then moves earlier.
	_, err := s.UpdateKey(ctx, auth.KeyUpdate{ID: pa.ID, Name: pa.Name, Restrictions: expiringIn(t, h(6)), Revision: pa.Revision})
	must(t, "UpdateKey", err)
	acct, err := s.Account(ctx, a.ID)
	must(t, "Account", err)
	u := acct.Update()
	u.Restrictions = expiringIn(t, h(4))
	_, err = s.UpdateAccount(ctx, u)
	must(t, "UpdateAccount", err)
	_, err = s.RevokeKey(ctx, revoked.ID, auth.AnyRevision, h(0.5))
	must(t, "RevokeKey", err)
	_, err = s.RevokeKey(ctx, pruned.ID, auth.AnyRevision, past(0))
	must(t, "RevokeKey", err)
	_, err = s.PruneKeys(ctx, past(time.Second))
	must(t, "PruneKeys", err)
	// An account closed and deleted takes its keys' expiries with it.
	gone, _ := expiringAccount(t, s, n, "gone", h(2), time.Time{})
	expiringKey(t, s, n, gone, "gone-sub", h(1))
	g, err := s.Account(ctx, gone.ID)
	must(t, "Account", err)
	gu := g.Update()
	gu.State = auth.AccountClosed
	_, err = s.UpdateAccount(ctx, gu)
	must(t, "UpdateAccount", err)
	must(t, "DeleteAccount", s.DeleteAccount(ctx, gone.ID))

	got := listExpiries(t, s, n, auth.ExpiryQuery{From: base, To: h(10)}, base)
	want := []string{"added@2h0m0s", "moved@3h0m0s", "a-primary@4h0m0s"}
	if !slices.Equal(got, want) {
		t.Errorf("ExpiringKeys after the changes = %q, want %q", got, want)
	}
	// Without its own expiry again, the primary key still expires with its account;
	// with one earlier than its account's, at its own.
	p, err := s.Key(ctx, pa.ID)
	must(t, "Key", err)
	p, err = s.UpdateKey(ctx, auth.KeyUpdate{ID: p.ID, Name: p.Name, Restrictions: expiringIn(t, h(3.5)), Revision: p.Revision})
	must(t, "UpdateKey", err)
	got = listExpiries(t, s, n, auth.ExpiryQuery{From: base, To: h(10)}, base)
	want = []string{"added@2h0m0s", "moved@3h0m0s", "a-primary@3h30m0s"}
	if !slices.Equal(got, want) {
		t.Errorf("ExpiringKeys after the primary key's own expiry came first = %q, want %q", got, want)
	}
	_, err = s.UpdateKey(ctx, auth.KeyUpdate{ID: p.ID, Name: p.Name, Restrictions: auth.Restrictions{}, Revision: p.Revision})
	must(t, "UpdateKey", err)
	got = listExpiries(t, s, n, auth.ExpiryQuery{From: base, To: h(10)}, base)
	want = []string{"added@2h0m0s", "moved@3h0m0s", "a-primary@4h0m0s"}
	if !slices.Equal(got, want) {
		t.Errorf("ExpiringKeys after the primary key's own expiry was cleared = %q, want %q", got, want)
	}
}

func ekMicroseconds(t *testing.T, s auth.KeyStore) {
	n, base := newIDs(), expiryBase(3)
	a, _ := expiringAccount(t, s, n, "a", time.Time{}, time.Time{})
	e := base.Add(time.Hour + 123456789*time.Nanosecond) // 1h0m0.123456789s
	expiringKey(t, s, n, a, "k", e)
	micro := base.Add(time.Hour + 123456*time.Microsecond)
	tests := []struct {
		name     string
		from, to time.Time
		listed   bool
	}{
		{"to at the microsecond", base, micro, true},
		{"to within the microsecond", base, micro.Add(500 * time.Nanosecond), true},
		{"to a microsecond before", base, micro.Add(-time.Microsecond), false},
		{"from at the microsecond", micro, micro.Add(time.Hour), false},
		{"from within the microsecond", micro.Add(999 * time.Nanosecond), micro.Add(time.Hour), false},
		{"from a microsecond before", micro.Add(-time.Microsecond), micro.Add(time.Hour), true},
	}
	for _, tt := range tests {
		page, err := expiries(t, s).ExpiringKeys(t.Context(), auth.ExpiryQuery{From: tt.from, To: tt.to})
		must(t, "ExpiringKeys", err)
		var got []auth.Expiry
		for _, x := range page.Expiries {
			if strings.HasPrefix(x.Key.ID, n.prefix) {
				got = append(got, x)
			}
		}
		if (len(got) == 1) != tt.listed {
			t.Errorf("%s: %d expiries listed, want listed %v", tt.name, len(got), tt.listed)
			continue
		}
		if tt.listed && !got[0].At.Equal(micro) {
			t.Errorf("%s: the key expires at %s, want %s (to the microsecond)", tt.name, got[0].At.Sub(base), micro.Sub(base))
		}
	}
}

func ekPrimaryAtItsAccountsInstant(t *testing.T, s auth.KeyStore) {
	n, base := newIDs(), expiryBase(5)
	h := func(d float64) time.Time { return base.Add(time.Duration(d * float64(time.Hour))) }
	// p-primary and q-primary expire at their accounts' instants; the keys around
	// them put the end of a page before, between and after their two expiries as the
	// page size changes.
	p, _ := expiringAccount(t, s, n, "p", h(1), h(1))
	expiringAccount(t, s, n, "q", h(1.5), h(1.5))
	expiringKey(t, s, n, p, "k-before", h(0.5))
	expiringKey(t, s, n, p, "z-after", h(1))
	expiringKey(t, s, n, p, "later", h(2))
	want := []string{"k-before@30m0s", "p-primary@1h0m0s", "z-after@1h0m0s", "q-primary@1h30m0s", "later@2h0m0s"}
	for _, limit := range []int{0, 1, 2, 3, 4, 5, 6} {
		got := listExpiries(t, s, n, auth.ExpiryQuery{From: base, To: h(10), Limit: limit}, base)
		if !slices.Equal(got, want) {
			t.Errorf("pages of %d: %q, want %q", limit, got, want)
		}
	}
}

func ekBadQuery(t *testing.T, s auth.KeyStore) {
	base := expiryBase(4)
	for _, q := range []auth.ExpiryQuery{
		{From: base},
		{From: base, To: base.Add(-time.Microsecond)},
		{To: base, Limit: -1},
		{To: base, Limit: auth.MaxExpiryPage + 1},
	} {
		_, err := expiries(t, s).ExpiringKeys(t.Context(), q)
		if wantErr(t, fmt.Sprintf("ExpiringKeys(%+v)", q), err, auth.ErrBadExpiryQuery) {
			wantErr(t, "ExpiringKeys", err, store.ErrInvalid)
		}
	}
	_, err := expiries(t, s).ExpiringKeys(canceled(t), auth.ExpiryQuery{To: base})
	wantErr(t, "ExpiringKeys with a canceled context", err, context.Canceled)
}
