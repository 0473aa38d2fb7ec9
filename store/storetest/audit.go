package storetest

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/store"
)

// TestAuditStore checks that an [audit.Store] behaves as its documentation says: entries
// come back intact, newest first, a page at a time; a listing sees one account's entries
// only and the time range asked for; retention deletes exactly the entries due; entries
// appended concurrently are all kept; an invalid entry or query is store.ErrInvalid.
//
// newStore is called once per subtest and must return an empty store; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestAuditStore(t *testing.T, newStore func(t *testing.T) audit.Store) {
	t.Helper()
	run(t, newStore, auditRows)
}

var auditRows = []behaviour[audit.Store]{
	{"AppendThenList",
		"An appended entry is listed with every field intact and a Seq of its own.",
		auAppendThenList},
	{"NewestFirst",
		"List returns entries newest first by At, whatever the order they were appended in; entries with the same At come in the reverse order of their appending (higher Seq first).",
		auNewestFirst},
	{"Pages",
		"Following Next page by page lists every entry exactly once, in order, and the last page has no Next.",
		auPages},
	{"AccountIsolation",
		"A listing for an account holds that account's entries only; a listing for no account holds every account's.",
		auAccountIsolation},
	{"TimeRange",
		"A listing holds the entries with From <= At < To.",
		auTimeRange},
	{"Prune",
		"Prune deletes exactly the entries whose At is before the instant given, reports how many, and keeps one at that instant.",
		auPrune},
	{"ConcurrentAppends",
		"Entries appended by many goroutines at once are all kept, each with a distinct Seq.",
		auConcurrentAppends},
	{"SameIDOnce",
		"An entry appended twice with the same ID, in two Appends or in one, is stored once, without an error, with the fields of the first; entries without an ID are never deduplicated; concurrent Appends of the same ID store it once.",
		auSameIDOnce},
	{"PrunedID",
		"Prune deletes an entry's ID with it: the IDs of the entries it kept still deduplicate.",
		auPrunedID},
	{"InvalidEntry",
		"An entry with text a store cannot hold (a NUL byte, invalid UTF-8), JSON that is not valid or a required field missing is store.ErrInvalid, and nothing of its Append is stored.",
		auInvalidEntry},
	{"InvalidQuery",
		"A limit out of bounds, a cursor no listing returned or an account that is not text is store.ErrInvalid.",
		auInvalidQuery},
}

// auditEntry returns an entry of account at t0+d, with every field set.
func auditEntry(account string, d time.Duration, reason string) audit.Entry {
	return audit.Entry{
		At: at(d), Actor: audit.Operator, Action: audit.KeyCreate, Account: account, Target: account + "-key",
		Before: json.RawMessage(`{"apis":["a","b"]}`), After: json.RawMessage(`{"apis":["a"],"allowed_ips":["10.0.0.0/8"]}`),
		Credits: -5, Addr: netip.MustParseAddr("2001:db8::1"), Reason: reason,
	}
}

// listAll lists every entry q selects, page by page, and checks that pages are not
// longer than asked.
func listAll(t *testing.T, s audit.Store, q audit.Query) []audit.Entry {
	t.Helper()
	var all []audit.Entry
	for range 1000 {
		p, err := s.List(t.Context(), q)
		must(t, "List", err)
		if q.Limit > 0 && len(p.Entries) > q.Limit {
			t.Fatalf("List with Limit %d returned %d entries", q.Limit, len(p.Entries))
		}
		all = append(all, p.Entries...)
		if p.Next == "" {
			return all
		}
		q.Cursor = p.Next
	}
	t.Fatal("List: Next never ended")
	return nil
}

// reasons returns the reasons of entries, in order.
func reasons(es []audit.Entry) []string {
	r := make([]string, len(es))
	for i, e := range es {
		r[i] = e.Reason
	}
	return r
}

func auAppendThenList(t *testing.T, s audit.Store) {
	n := newIDs()
	want := auditEntry(n.id("a"), 0, "support ticket 12 ✓")
	want.Action, want.ID = audit.CreditsAdjust, n.id("entry")
	bare := audit.Entry{At: at(time.Second), Actor: "key-1", Action: audit.KeyRevoke, Account: n.id("a")}
	must(t, "Append", s.Append(t.Context(), want, bare))
	got := listAll(t, s, audit.Query{Account: n.id("a")})
	if len(got) != 2 {
		t.Fatalf("List: %d entries, want 2", len(got))
	}
	if got[0].Seq == 0 || got[1].Seq == 0 || got[0].Seq == got[1].Seq {
		t.Errorf("Seqs %d and %d: want two distinct, non-zero", got[0].Seq, got[1].Seq)
	}
	for i, w := range []audit.Entry{bare, want} {
		g := got[i]
		g.Seq = 0
		if !g.At.Equal(w.At) {
			t.Errorf("entry %d: At %v, want %v", i, g.At, w.At)
		}
		g.At = w.At
		if !reflect.DeepEqual(g, w) {
			t.Errorf("entry %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func auNewestFirst(t *testing.T, s audit.Store) {
	acct := newIDs().id("a")
	for _, e := range []audit.Entry{
		auditEntry(acct, 2*time.Second, "2a"),
		auditEntry(acct, 0, "0"),
		auditEntry(acct, 3*time.Second, "3"),
		auditEntry(acct, 2*time.Second, "2b"),
	} {
		must(t, "Append", s.Append(t.Context(), e))
	}
	got := reasons(listAll(t, s, audit.Query{Account: acct}))
	if want := []string{"3", "2b", "2a", "0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("List order %q, want %q", got, want)
	}
}

func auPages(t *testing.T, s audit.Store) {
	acct := newIDs().id("a")
	var batch []audit.Entry
	var want []string
	for i := range 25 {
		// Three entries share each second, so pages also break between equal At.
		batch = append(batch, auditEntry(acct, time.Duration(i/3)*time.Second, fmt.Sprint(i)))
	}
	must(t, "Append", s.Append(t.Context(), batch...))
	for i := 24; i >= 0; i-- {
		want = append(want, fmt.Sprint(i))
	}
	for _, limit := range []int{1, 3, 7, 25, 100} {
		got := reasons(listAll(t, s, audit.Query{Account: acct, Limit: limit}))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pages of %d: %q, want %q", limit, got, want)
		}
	}
	p, err := s.List(t.Context(), audit.Query{Account: acct, Limit: 25})
	must(t, "List", err)
	if p.Next != "" {
		t.Errorf("List of all 25 in a page of 25: Next %q, want none", p.Next)
	}
	p, err = s.List(t.Context(), audit.Query{Account: acct})
	must(t, "List", err)
	if len(p.Entries) != 25 {
		t.Errorf("List with no limit: %d entries, want all 25 (within DefaultLimit)", len(p.Entries))
	}
}

func auAccountIsolation(t *testing.T, s audit.Store) {
	n := newIDs()
	a, b := n.id("a"), n.id("b")
	must(t, "Append", s.Append(t.Context(), auditEntry(a, 0, "a0"), auditEntry(b, time.Second, "b1"), auditEntry(a, 2*time.Second, "a2")))
	if got, want := reasons(listAll(t, s, audit.Query{Account: a})), []string{"a2", "a0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("List of %s: %q, want %q", a, got, want)
	}
	if got, want := reasons(listAll(t, s, audit.Query{Account: b})), []string{"b1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("List of %s: %q, want %q", b, got, want)
	}
	if got := listAll(t, s, audit.Query{Account: n.id("none")}); len(got) != 0 {
		t.Errorf("List of an account with no entries: %d entries", len(got))
	}
	if got, want := reasons(listAll(t, s, audit.Query{Limit: 2})), []string{"a2", "b1", "a0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("List of every account: %q, want %q", got, want)
	}
}

func auTimeRange(t *testing.T, s audit.Store) {
	acct := newIDs().id("a")
	for i := range 5 {
		must(t, "Append", s.Append(t.Context(), auditEntry(acct, time.Duration(i)*time.Hour, fmt.Sprint(i))))
	}
	for _, tc := range []struct {
		from, to time.Time
		want     []string
	}{
		{time.Time{}, time.Time{}, []string{"4", "3", "2", "1", "0"}},
		{at(time.Hour), at(3 * time.Hour), []string{"2", "1"}},
		{at(time.Hour + time.Second), time.Time{}, []string{"4", "3", "2"}},
		{time.Time{}, at(time.Hour), []string{"0"}},
		{at(5 * time.Hour), time.Time{}, nil},
	} {
		got := listAll(t, s, audit.Query{Account: acct, From: tc.from, To: tc.to, Limit: 2})
		if !reflect.DeepEqual(reasons(got), append([]string{}, tc.want...)) {
			t.Errorf("List from %v to %v: %q, want %q", tc.from, tc.to, reasons(got), tc.want)
		}
	}
}

func auPrune(t *testing.T, s audit.Store) {
	n := newIDs()
	for i := range 4 {
		must(t, "Append", s.Append(t.Context(), auditEntry(n.id("a"), time.Duration(i)*time.Hour, fmt.Sprint(i)),
			auditEntry(n.id("b"), time.Duration(i)*time.Hour, fmt.Sprint(i))))
	}
	got, err := s.Prune(t.Context(), at(2*time.Hour))
	must(t, "Prune", err)
	if got != 4 {
		t.Errorf("Prune: %d deleted, want 4", got)
	}
	for _, acct := range []string{n.id("a"), n.id("b")} {
		if got, want := reasons(listAll(t, s, audit.Query{Account: acct})), []string{"3", "2"}; !reflect.DeepEqual(got, want) {
			t.Errorf("after Prune, %s: %q, want %q", acct, got, want)
		}
	}
	got, err = s.Prune(t.Context(), at(2*time.Hour))
	must(t, "Prune again", err)
	if got != 0 {
		t.Errorf("Prune again: %d deleted, want 0", got)
	}
}

func auConcurrentAppends(t *testing.T, s audit.Store) {
	acct := newIDs().id("a")
	const goroutines, each = 64, 5
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			var batch []audit.Entry
			for i := range each {
				batch = append(batch, auditEntry(acct, time.Duration(i)*time.Second, fmt.Sprint(g, "/", i)))
			}
			errs <- s.Append(t.Context(), batch...)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, "Append", err)
	}
	got := listAll(t, s, audit.Query{Account: acct, Limit: audit.MaxLimit})
	if len(got) != goroutines*each {
		t.Fatalf("List: %d entries, want %d", len(got), goroutines*each)
	}
	seqs, seen := make(map[int64]bool), make(map[string]bool)
	for _, e := range got {
		if seqs[e.Seq] || seen[e.Reason] {
			t.Errorf("entry %q (Seq %d) listed twice, or its Seq is shared", e.Reason, e.Seq)
		}
		seqs[e.Seq], seen[e.Reason] = true, true
	}
}

func auInvalidEntry(t *testing.T, s audit.Store) {
	acct := newIDs().id("a")
	good := auditEntry(acct, 0, "fine")
	for _, tc := range []struct {
		name string
		bad  func(*audit.Entry)
	}{
		{"NUL in reason", func(e *audit.Entry) { e.Reason = "a\x00b" }},
		{"invalid UTF-8 in actor", func(e *audit.Entry) { e.Actor = "\xff" }},
		{"NUL in target", func(e *audit.Entry) { e.Target = "\x00" }},
		{"invalid UTF-8 in action", func(e *audit.Entry) { e.Action = "key.\xc3" }},
		{"invalid JSON in after", func(e *audit.Entry) { e.After = json.RawMessage(`{"apis":`) }},
		{"no time", func(e *audit.Entry) { e.At = time.Time{} }},
		{"no actor", func(e *audit.Entry) { e.Actor = "" }},
		{"no action", func(e *audit.Entry) { e.Action = "" }},
		{"no account", func(e *audit.Entry) { e.Account = "" }},
		{"NUL in id", func(e *audit.Entry) { e.ID = "a\x00" }},
		{"id too long", func(e *audit.Entry) { e.ID = strings.Repeat("i", audit.MaxIDLength+1) }},
	} {
		bad := good
		tc.bad(&bad)
		wantErr(t, "Append with "+tc.name, s.Append(t.Context(), good, bad), store.ErrInvalid)
	}
	if got := listAll(t, s, audit.Query{}); len(got) != 0 {
		t.Errorf("after refused appends: %d entries stored, want none", len(got))
	}
}

func auInvalidQuery(t *testing.T, s audit.Store) {
	acct := newIDs().id("a")
	must(t, "Append", s.Append(t.Context(), auditEntry(acct, 0, "0"), auditEntry(acct, 0, "1")))
	for _, q := range []audit.Query{
		{Account: acct, Limit: -1},
		{Account: acct, Limit: audit.MaxLimit + 1},
		{Account: acct, Cursor: "not a cursor"},
		{Account: acct, Cursor: "1.2.3"},
		{Account: acct, Cursor: "zzzzzzzzzzzzzzzzzzzz.1"},
		{Account: "a\x00b"},
		{Account: "\xff"},
	} {
		_, err := s.List(t.Context(), q)
		wantErr(t, fmt.Sprintf("List(%+v)", q), err, store.ErrInvalid)
	}
}

func auSameIDOnce(t *testing.T, s audit.Store) {
	n := newIDs()
	acct := n.id("a")
	first := auditEntry(acct, 0, "first")
	first.ID = n.id("entry")
	again := first
	again.Reason, again.At = "again", at(time.Second) // a retry never differs, but the store keeps the first
	plain := auditEntry(acct, 2*time.Second, "plain")
	must(t, "Append", s.Append(t.Context(), first, plain))
	must(t, "Append the same id again", s.Append(t.Context(), again, plain))
	other := auditEntry(acct, 3*time.Second, "twice in one")
	other.ID = n.id("other")
	must(t, "Append an id twice in one call", s.Append(t.Context(), other, other))
	got := listAll(t, s, audit.Query{Account: acct})
	if want := []string{"twice in one", "plain", "plain", "first"}; !reflect.DeepEqual(reasons(got), want) {
		t.Fatalf("List: %q, want %q (one entry per id, every entry without one)", reasons(got), want)
	}
	if got[3].ID != first.ID || !got[3].At.Equal(first.At) || got[1].ID != "" {
		t.Errorf("List: ids %q, %q and At %v; want the first entry with its id and At, the plain ones with none", got[3].ID, got[1].ID, got[3].At)
	}

	// Instances retrying the same entries at once store each once.
	raced := auditEntry(acct, 4*time.Second, "raced")
	raced.ID = n.id("raced")
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Append(t.Context(), raced) })
	}
	wg.Wait()
	for _, err := range errs {
		must(t, "concurrent Append of one id", err)
	}
	if got := listAll(t, s, audit.Query{Account: acct, From: at(4 * time.Second)}); len(got) != 1 {
		t.Errorf("after 16 concurrent Appends of one id: %d entries, want 1", len(got))
	}
}

func auPrunedID(t *testing.T, s audit.Store) {
	n := newIDs()
	acct := n.id("a")
	old, kept := auditEntry(acct, 0, "old"), auditEntry(acct, time.Hour, "kept")
	old.ID, kept.ID = n.id("old"), n.id("kept")
	must(t, "Append", s.Append(t.Context(), old, kept))
	if _, err := s.Prune(t.Context(), at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	must(t, "Append the kept entry again", s.Append(t.Context(), kept))
	if got := reasons(listAll(t, s, audit.Query{Account: acct})); !reflect.DeepEqual(got, []string{"kept"}) {
		t.Errorf("after Prune and a repeated Append: %q, want the kept entry once", got)
	}
}
