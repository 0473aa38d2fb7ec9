package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
)

// TestKeyJournal checks that a [journal.KeyStore] records the entry that the context of
// each of its writes carries ([journal.With]), in the write's atomic step and only when
// the write succeeds, and that its journal is claimed and removed as [journal.Store]
// says.
//
// newStore is called once per subtest and must return an empty store; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestKeyJournal(t *testing.T, newStore func(t *testing.T) journal.KeyStore) {
	t.Helper()
	run(t, newStore, withStoreRows(keyJournalRows, keysRecorder))
}

// TestLedgerJournal checks that a [journal.Ledger] records the entry that the context of
// its Adjust carries ([journal.With]), in the adjustment's atomic step and only when it
// succeeds, and that its journal is claimed and removed as [journal.Store] says.
//
// newStore is called once per subtest and must return an empty store; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestLedgerJournal(t *testing.T, newStore func(t *testing.T) journal.Ledger) {
	t.Helper()
	run(t, newStore, withStoreRows(ledgerJournalRows, ledgerRecorder))
}

// withStoreRows returns rows and the rows of journal.Store, which record entries with
// the recorder newRecorder makes for the store.
func withStoreRows[S journal.Store](rows []behaviour[S], newRecorder func(*testing.T, S) recorder) []behaviour[S] {
	rows = slices.Clone(rows)
	for _, r := range journalStoreRows {
		rows = append(rows, behaviour[S]{r.name, r.explanation, func(t *testing.T, s S) {
			r.check(t, s, newRecorder(t, s))
		}})
	}
	return rows
}

var keyJournalRows = []behaviour[journal.KeyStore]{
	{"EveryWriteRecords",
		"Each write given an entry in its context (CreateAccount, CreateKey, UpdateKey, RotateKey, RevokeKey, UpdateAccount, DeleteAccount) records its entry when it succeeds, with its id, time and bytes intact, and a revocation of a revoked key records one too.",
		kjEveryWriteRecords},
	{"RefusedWriteRecordsNothing",
		"A write given an entry that fails (a taken id, a missing account or key, a revision that changed, a revoked key, a closed account, an account that is not closed) records nothing and changes nothing.",
		kjRefusedWriteRecordsNothing},
	{"PlainWriteRecordsNothing",
		"A write whose context carries no entry records nothing.",
		kjPlainWriteRecordsNothing},
	{"SameIDOnce",
		"Two writes given entries of one id keep one entry: the first.",
		kjSameIDOnce},
	{"InvalidEntry",
		"A write given an entry that is not valid (no id, no time, no change, an id too long or not text) fails with store.ErrInvalid and changes nothing.",
		kjInvalidEntry},
	{"OnlyTheWriteGivenTheEntry",
		"A write records the entry its own context carries, not one that an earlier write's context carried: a write made with a context without the entry, after one made with it, records nothing more.",
		kjOnlyTheWriteGivenTheEntry},
}

var ledgerJournalRows = []behaviour[journal.Ledger]{
	{"AdjustRecords",
		"An Adjust given an entry in its context records it when it succeeds; its replay (the same request id) succeeds and keeps the one entry; an Adjust whose context carries none records nothing.",
		ljAdjustRecords},
	{"RefusedAdjustRecordsNothing",
		"An Adjust given an entry that fails (no balance, insufficient credits, too many credits, an invalid entry) records nothing and changes nothing.",
		ljRefusedAdjustRecordsNothing},
}

// A recorder makes a change that records e, through the store's journaled view.
type recorder func(t *testing.T, e journal.Entry)

// keysRecorder records each entry with the creation of an account of its own.
func keysRecorder(t *testing.T, s journal.KeyStore) recorder {
	n := newIDs()
	var mu sync.Mutex
	count := 0
	return func(t *testing.T, e journal.Entry) {
		t.Helper()
		mu.Lock()
		count++
		label := fmt.Sprintf("a%d", count)
		mu.Unlock()
		a, k := plainAccount(n, label)
		must(t, "CreateAccount with an entry", s.CreateAccount(journal.With(t.Context(), e), a, k))
	}
}

// ledgerRecorder records each entry with a grant to an account opened for the suite.
func ledgerRecorder(t *testing.T, s journal.Ledger) recorder {
	acct := openAccount(t, s, newIDs(), "acct", 0, p0)
	return func(t *testing.T, e journal.Entry) {
		t.Helper()
		_, err := s.Adjust(journal.With(t.Context(), e), adjustment(acct, newRequest(), 1, p0))
		must(t, "Adjust with an entry", err)
	}
}

// journalStoreRows are the rows of journal.Store, which both suites run with the
// recorder of their store.
var journalStoreRows = []struct {
	name, explanation string
	check             func(t *testing.T, s journal.Store, record recorder)
}{
	{"ClaimBeforeAndOrder",
		"Claim returns the entries made before its before, oldest first (by time, then id), at most limit of them, and none made at or after it.",
		jsClaimBeforeAndOrder},
	{"ClaimLease",
		"An entry claimed is not claimed again until its lease ends, and is claimed again from then on if it was not removed.",
		jsClaimLease},
	{"Remove",
		"Remove deletes the entries named, claimed or not; an id of no entry is skipped; a removed entry is never claimed again, and its id may be recorded anew.",
		jsRemove},
	{"ClaimBounds",
		"Claim refuses a limit below 1 or above journal.MaxClaim and a lease that is not positive with store.ErrInvalid; a canceled context fails Claim and Remove.",
		jsClaimBounds},
	{"ConcurrentClaims",
		"Claims made at once from many goroutines each take different entries: every entry is claimed once.",
		jsConcurrentClaims},
}

// entry returns an entry of the suite, made at the instant d after t0, whose change is
// bytes that are no text (a NUL byte, a byte that is not UTF-8): a store keeps them as
// they are.
func entry(n ids, label string, d time.Duration) journal.Entry {
	return journal.Entry{ID: n.id(label), At: at(d), Change: []byte("\x00\xff{" + label + "}")}
}

// claimAll claims every entry made before before at now, with a long lease.
func claimAll(t *testing.T, s journal.Store, before, now time.Time) []journal.Entry {
	t.Helper()
	es, err := s.Claim(t.Context(), before, now, time.Hour, journal.MaxClaim)
	must(t, "Claim", err)
	return es
}

// wantEntries checks that got are want, in order, every field intact.
func wantEntries(t *testing.T, op string, got, want []journal.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d entries %v, want %d %v", op, len(got), entryIDs(got), len(want), entryIDs(want))
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || !g.At.Equal(w.At) || !bytes.Equal(g.Change, w.Change) {
			t.Errorf("%s: entry %d is {%q %v %q}, want {%q %v %q}", op, i, g.ID, g.At, g.Change, w.ID, w.At, w.Change)
		}
	}
}

func entryIDs(es []journal.Entry) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}

// wantJournal checks that the journal holds want and nothing else: every entry,
// claimed or not. It claims them, far in the future, so that a row's later wantJournal
// gives a later nth (its 1st, 2nd, ...), to look past the leases the one before took.
func wantJournal(t *testing.T, s journal.Store, nth int, op string, want ...journal.Entry) {
	t.Helper()
	far := at(10*365*24*time.Hour + time.Duration(nth)*24*time.Hour)
	got := claimAll(t, s, far, far)
	wantEntries(t, op, got, want)
}

func kjEveryWriteRecords(t *testing.T, s journal.KeyStore) {
	ctx, n := t.Context(), newIDs()
	var want []journal.Entry
	with := func(label string, d time.Duration) context.Context {
		e := entry(n, label, d)
		want = append(want, e)
		return journal.With(ctx, e)
	}
	a, primary := plainAccount(n, "acct")
	must(t, "CreateAccount", s.CreateAccount(with("create-account", time.Minute), a, primary))
	k := newKey(n, a, "ci", at(2*time.Minute))
	must(t, "CreateKey", s.CreateKey(with("create-key", 2*time.Minute), k, auth.KeyLimit{Max: 5}))
	updated, err := s.UpdateKey(with("update-key", 3*time.Minute), auth.KeyUpdate{ID: k.ID, Name: "deploys", Revision: 0})
	must(t, "UpdateKey", err)
	_, err = s.RotateKey(with("rotate-key", 4*time.Minute), k.ID, updated.Revision, newHash(), at(4*time.Minute))
	must(t, "RotateKey", err)
	_, err = s.RevokeKey(with("revoke-key", 5*time.Minute), k.ID, auth.AnyRevision, at(5*time.Minute))
	must(t, "RevokeKey", err)
	_, err = s.RevokeKey(with("revoke-again", 6*time.Minute), k.ID, auth.AnyRevision, at(6*time.Minute))
	must(t, "RevokeKey of the revoked key", err)
	u := a.Update()
	u.State, u.StateChangedAt = auth.AccountClosed, at(7*time.Minute)
	_, err = s.UpdateAccount(with("close", 7*time.Minute), u)
	must(t, "UpdateAccount", err)
	must(t, "DeleteAccount", s.DeleteAccount(with("delete", 8*time.Minute), a.ID))
	wantJournal(t, s, 1, "the journal after every write", want...)
}

func kjRefusedWriteRecordsNothing(t *testing.T, s journal.KeyStore) {
	ctx, n := t.Context(), newIDs()
	a, primary := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, a, "ci", at(time.Minute))
	revoked := createKey(t, s, n, a, "old", at(time.Minute))
	_, err := s.RevokeKey(ctx, revoked.ID, auth.AnyRevision, at(time.Minute))
	must(t, "RevokeKey", err)
	via := journal.With(ctx, entry(n, "refused", time.Minute))

	other, otherKey := plainAccount(n, "other")
	other.ID = a.ID
	wantErr(t, "CreateAccount with a taken id", s.CreateAccount(via, other, otherKey), store.ErrConflict)
	ghost := newKey(n, auth.Account{ID: n.id("ghost")}, "ghost-key", at(time.Minute))
	wantErr(t, "CreateKey of a missing account", s.CreateKey(via, ghost, auth.KeyLimit{}), store.ErrNotFound)
	wantErr(t, "CreateKey past its limit", s.CreateKey(via, newKey(n, a, "third", at(time.Minute)), auth.KeyLimit{Max: 1}), store.ErrConflict)
	_, err = s.UpdateKey(via, auth.KeyUpdate{ID: k.ID, Name: "x", Revision: k.Revision + 1})
	wantErr(t, "UpdateKey at another revision", err, store.ErrConflict)
	_, err = s.RotateKey(via, revoked.ID, auth.AnyRevision, newHash(), at(time.Hour))
	wantErr(t, "RotateKey of a revoked key", err, store.ErrConflict)
	_, err = s.RotateKey(via, k.ID, k.Revision, primary.Hash, at(time.Hour))
	wantErr(t, "RotateKey to a taken hash", err, store.ErrConflict)
	_, err = s.RevokeKey(via, k.ID, k.Revision+1, at(time.Hour))
	wantErr(t, "RevokeKey at another revision", err, store.ErrConflict)
	_, err = s.RevokeKey(via, n.id("missing"), auth.AnyRevision, at(time.Hour))
	wantErr(t, "RevokeKey of a missing key", err, store.ErrNotFound)
	u := a.Update()
	u.Revision++
	u.State = auth.AccountSuspended
	_, err = s.UpdateAccount(via, u)
	wantErr(t, "UpdateAccount at another revision", err, auth.ErrAccountChanged)
	wantErr(t, "DeleteAccount of an active account", s.DeleteAccount(via, a.ID), auth.ErrAccountNotClosed)
	wantErr(t, "DeleteAccount of a missing account", s.DeleteAccount(via, n.id("ghost")), store.ErrNotFound)
	closed := closeAccount(t, s, a)
	u = closed.Update()
	u.State = auth.AccountActive
	_, err = s.UpdateAccount(via, u)
	wantErr(t, "UpdateAccount of a closed account", err, auth.ErrAccountClosed)

	wantJournal(t, s, 1, "the journal after refused writes")
	wantKey(t, s, k)
	got, err := s.Account(ctx, a.ID)
	must(t, "Account", err)
	if got.Revision != closed.Revision || got.State != auth.AccountClosed {
		t.Errorf("the account after refused writes: revision %d, state %q; want %d, closed", got.Revision, got.State, closed.Revision)
	}
}

func kjPlainWriteRecordsNothing(t *testing.T, s journal.KeyStore) {
	ctx, n := t.Context(), newIDs()
	a, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, a, "ci", at(time.Minute))
	_, err := s.RotateKey(ctx, k.ID, auth.AnyRevision, newHash(), at(time.Hour))
	must(t, "RotateKey", err)
	_, err = s.RevokeKey(ctx, k.ID, auth.AnyRevision, at(time.Hour))
	must(t, "RevokeKey", err)
	closeAccount(t, s, a)
	must(t, "DeleteAccount", s.DeleteAccount(ctx, a.ID))
	wantJournal(t, s, 1, "the journal after writes given no entry")
}

func kjSameIDOnce(t *testing.T, s journal.KeyStore) {
	ctx, n := t.Context(), newIDs()
	a, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, a, "ci", at(time.Minute))
	first := entry(n, "change", time.Minute)
	again := first
	again.At, again.Change = at(time.Hour), []byte("another")
	_, err := s.RotateKey(journal.With(ctx, first), k.ID, auth.AnyRevision, newHash(), at(time.Minute))
	must(t, "RotateKey", err)
	_, err = s.RotateKey(journal.With(ctx, again), k.ID, auth.AnyRevision, newHash(), at(time.Hour))
	must(t, "second RotateKey, with an entry of the same id", err)
	wantJournal(t, s, 1, "the journal after two writes of one id", first)
}

func kjInvalidEntry(t *testing.T, s journal.KeyStore) {
	ctx, n := t.Context(), newIDs()
	a, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, a, "ci", at(time.Minute))
	good := entry(n, "x", time.Minute)
	for _, tc := range []struct {
		name string
		edit func(e *journal.Entry)
	}{
		{"no id", func(e *journal.Entry) { e.ID = "" }},
		{"an id too long", func(e *journal.Entry) { e.ID = string(bytes.Repeat([]byte("i"), journal.MaxIDLength+1)) }},
		{"an id with a NUL byte", func(e *journal.Entry) { e.ID = "a\x00b" }},
		{"no time", func(e *journal.Entry) { e.At = time.Time{} }},
		{"no change", func(e *journal.Entry) { e.Change = nil }},
		{"a change too long", func(e *journal.Entry) { e.Change = make([]byte, journal.MaxChange+1) }},
	} {
		e := good
		tc.edit(&e)
		_, err := s.RotateKey(journal.With(ctx, e), k.ID, auth.AnyRevision, newHash(), at(time.Hour))
		wantErr(t, "RotateKey with an entry of "+tc.name, err, store.ErrInvalid)
	}
	wantKey(t, s, k)
	wantJournal(t, s, 1, "the journal after writes of invalid entries")
}

func kjOnlyTheWriteGivenTheEntry(t *testing.T, s journal.KeyStore) {
	ctx, n := t.Context(), newIDs()
	a, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, a, "ci", at(time.Minute))
	e := entry(n, "rotate", time.Minute)
	_, err := s.RotateKey(journal.With(ctx, e), k.ID, auth.AnyRevision, newHash(), at(time.Minute))
	must(t, "RotateKey with the entry", err)
	must(t, "Remove", s.Remove(ctx, e.ID))
	_, err = s.RotateKey(ctx, k.ID, auth.AnyRevision, newHash(), at(time.Hour))
	must(t, "RotateKey without it", err)
	wantJournal(t, s, 1, "the journal after a write given no entry, once the one given it was removed")
}

func ljAdjustRecords(t *testing.T, s journal.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, s, n, "acct", 100, p0)
	_, err := s.Adjust(ctx, adjustment(acct, newRequest(), 5, p0))
	must(t, "Adjust given no entry", err)
	wantJournal(t, s, 1, "the journal after an Adjust given no entry")

	grant, take := entry(n, "grant", time.Minute), entry(n, "take", 2*time.Minute)
	id := newRequest()
	b, err := s.Adjust(journal.With(ctx, grant), adjustment(acct, id, 10, p0))
	must(t, "Adjust with an entry", err)
	checkBalance(t, "Adjust with an entry", b, 115, 0, p0)
	_, err = s.Adjust(journal.With(ctx, grant), adjustment(acct, id, 10, p0))
	must(t, "the replay of the Adjust with an entry", err)
	_, err = s.Adjust(journal.With(ctx, take), adjustment(acct, newRequest(), -15, p0))
	must(t, "Adjust taking credits with an entry", err)
	wantBalance(t, s, acct, p0, 100, 0)
	wantJournal(t, s, 2, "the journal after Adjust with entries", grant, take)
}

func ljRefusedAdjustRecordsNothing(t *testing.T, s journal.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, s, n, "acct", 100, p0)
	via := journal.With(ctx, entry(n, "refused", time.Minute))
	_, err := s.Adjust(via, adjustment(n.id("ghost"), newRequest(), 10, p0))
	wantErr(t, "Adjust of an account with no balance", err, store.ErrNotFound)
	_, err = s.Adjust(via, adjustment(acct, newRequest(), -101, p0))
	wantErr(t, "Adjust taking more than the balance", err, driver.ErrInsufficientCredits)
	_, err = s.Adjust(via, adjustment(acct, newRequest(), driver.MaxCredits, p0))
	wantErr(t, "Adjust past the maximum", err, driver.ErrTooManyCredits)
	bad := entry(n, "bad", time.Minute)
	bad.Change = nil
	_, err = s.Adjust(journal.With(ctx, bad), adjustment(acct, newRequest(), 1, p0))
	wantErr(t, "Adjust with an invalid entry", err, store.ErrInvalid)
	wantBalance(t, s, acct, p0, 100, 0)
	wantJournal(t, s, 1, "the journal after refused adjustments")
}

func jsClaimBeforeAndOrder(t *testing.T, s journal.Store, record recorder) {
	n := newIDs()
	// Recorded out of order: b and a at the same instant, ordered by id.
	c, b, a, late := entry(n, "c", 2*time.Minute), entry(n, "b", time.Minute), entry(n, "a", time.Minute), entry(n, "late", time.Hour)
	for _, e := range []journal.Entry{c, b, late, a} {
		record(t, e)
	}
	es, err := s.Claim(t.Context(), at(time.Hour), at(time.Hour), time.Minute, 2)
	must(t, "Claim of 2", err)
	wantEntries(t, "Claim of 2 before the hour", es, []journal.Entry{a, b})
	es, err = s.Claim(t.Context(), at(time.Hour), at(time.Hour), time.Minute, 10)
	must(t, "Claim of 10", err)
	wantEntries(t, "Claim of the rest before the hour", es, []journal.Entry{c})
	es, err = s.Claim(t.Context(), at(time.Hour+time.Second), at(time.Hour), time.Minute, 10)
	must(t, "Claim after the hour", err)
	wantEntries(t, "Claim a second after the last entry's time", es, []journal.Entry{late})
}

func jsClaimLease(t *testing.T, s journal.Store, record recorder) {
	n := newIDs()
	e := entry(n, "e", time.Minute)
	record(t, e)
	now := at(time.Hour)
	es, err := s.Claim(t.Context(), now, now, time.Minute, 10)
	must(t, "Claim", err)
	wantEntries(t, "the first Claim", es, []journal.Entry{e})
	es, err = s.Claim(t.Context(), now, now.Add(59*time.Second), time.Minute, 10)
	must(t, "Claim within the lease", err)
	wantEntries(t, "a Claim within the lease", es, nil)
	es, err = s.Claim(t.Context(), now, now.Add(time.Minute), time.Minute, 10)
	must(t, "Claim at the lease's end", err)
	wantEntries(t, "a Claim at the lease's end", es, []journal.Entry{e})
}

func jsRemove(t *testing.T, s journal.Store, record recorder) {
	n := newIDs()
	a, b, c := entry(n, "a", time.Minute), entry(n, "b", 2*time.Minute), entry(n, "c", 3*time.Minute)
	for _, e := range []journal.Entry{a, b, c} {
		record(t, e)
	}
	now := at(time.Hour)
	es, err := s.Claim(t.Context(), now, now, time.Minute, 1)
	must(t, "Claim", err)
	wantEntries(t, "Claim of 1", es, []journal.Entry{a})
	must(t, "Remove of a claimed entry, one not claimed and an unknown id", s.Remove(t.Context(), a.ID, c.ID, n.id("unknown")))
	must(t, "Remove of nothing", s.Remove(t.Context()))
	wantJournal(t, s, 1, "the journal after Remove", b)
	record(t, a) // its id is free again
	wantJournal(t, s, 2, "the journal after the removed id is recorded anew", a, b)
}

func jsClaimBounds(t *testing.T, s journal.Store, record recorder) {
	n := newIDs()
	record(t, entry(n, "e", time.Minute))
	now := at(time.Hour)
	for _, tc := range []struct {
		lease time.Duration
		limit int
	}{{time.Minute, 0}, {time.Minute, -1}, {time.Minute, journal.MaxClaim + 1}, {0, 1}, {-time.Second, 1}} {
		_, err := s.Claim(t.Context(), now, now, tc.lease, tc.limit)
		wantErr(t, fmt.Sprintf("Claim with a lease of %s and a limit of %d", tc.lease, tc.limit), err, store.ErrInvalid)
	}
	_, err := s.Claim(canceled(t), now, now, time.Minute, 1)
	wantErr(t, "Claim with a canceled context", err, context.Canceled)
	wantErr(t, "Remove with a canceled context", s.Remove(canceled(t), n.id("e")), context.Canceled)
	wantJournal(t, s, 1, "the journal after refused claims", entry(n, "e", time.Minute))
}

func jsConcurrentClaims(t *testing.T, s journal.Store, record recorder) {
	n := newIDs()
	const entries = 40
	for i := range entries {
		record(t, entry(n, fmt.Sprintf("e%02d", i), time.Duration(i)*time.Second))
	}
	now := at(time.Hour)
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		wg      sync.WaitGroup
	)
	for range workers / 4 {
		wg.Go(func() {
			es, err := s.Claim(t.Context(), now, now, time.Minute, 3)
			if err != nil {
				t.Errorf("Claim: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, e := range es {
				claimed[e.ID]++
			}
		})
	}
	wg.Wait()
	for id, c := range claimed {
		if c != 1 {
			t.Errorf("entry %s was claimed %d times at once", id, c)
		}
	}
	// What the claims did not take (one may take fewer than its limit while others
	// hold the entries it looked at) is claimed now, and all of them once.
	for _, e := range claimAll(t, s, now, now) {
		if claimed[e.ID] > 0 {
			t.Errorf("entry %s was claimed again within its lease", e.ID)
		}
		claimed[e.ID]++
	}
	if len(claimed) != entries {
		t.Errorf("%d entries claimed, want every one of %d", len(claimed), entries)
	}
}
