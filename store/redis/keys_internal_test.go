package redis

import (
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/billing/driver"
)

// TestCallKeys checks that the keys of a hot-path call, built in one piece, are the
// names that each key's own method gives, for an account id that is its own hash tag
// and for one that is escaped.
func TestCallKeys(t *testing.T) {
	s := &Store{prefix: "tollgate"}
	r := driver.RequestID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}
	for _, id := range []string{"acme", "a}b", "", "~x"} {
		a := s.account(id)
		got := a.callKeys(r, kindRecord, kindKeys, kindTat, kindLeases, kindBalance, kindUsage, kindOpen)
		want := []string{a.record(), a.keys(), a.tat(), a.leases(), a.balance(), a.usage(), a.open(), a.marker(r)}
		if !slices.Equal(got, want) {
			t.Errorf("account %q: callKeys = %q, want %q", id, got, want)
		}
		if got := a.callKeys(r); !slices.Equal(got, []string{a.marker(r)}) {
			t.Errorf("account %q: callKeys with no kinds = %q, want the marker %q", id, got, a.marker(r))
		}
	}
}

// TestRunsPassRepeatedParametersOnce checks that runs merges the steps of one script
// on one account into one call whose steps pass their parameters only when they differ
// from the step's before in the run (an empty string in their place otherwise), while
// other accounts' steps and plain commands stay calls of their own.
func TestRunsPassRepeatedParametersOnce(t *testing.T) {
	step := func(account, member, params string) scriptCall {
		return scriptCall{admitScript, []string{account + ":acct", account + ":" + member}, []any{member, params}, 1}
	}
	zrem := scriptCall{args: []any{"zrem", "a:lease", "m9"}}
	calls := []scriptCall{
		step("a", "m1", "P"), step("a", "m2", "P"), step("b", "m3", "P"), step("a", "m4", "Q"),
		zrem, step("a", "m5", "Q"), step("a", "m6", "P"), step("b", "m7", "P"),
	}
	rs := runs(calls)
	if len(rs) != 3 {
		t.Fatalf("runs = %d, want 3 (account a, account b, the ZREM)", len(rs))
	}
	want := []struct {
		of   []int
		keys []string
		args []any
	}{
		{[]int{0, 1, 3, 5, 6}, []string{"a:acct", "a:m1", "a:m2", "a:m4", "a:m5", "a:m6"},
			[]any{"m1", "P", "m2", "", "m4", "Q", "m5", "", "m6", "P"}},
		{[]int{2, 7}, []string{"b:acct", "b:m3", "b:m7"}, []any{"m3", "P", "m7", ""}},
		{[]int{4}, nil, zrem.args},
	}
	for i, w := range want {
		r := rs[i]
		if !slices.Equal(r.of, w.of) || !slices.Equal(r.call.keys, w.keys) || !slices.Equal(r.call.args, w.args) {
			t.Errorf("run %d: of %v, keys %q, args %q; want %v, %q, %q", i, r.of, r.call.keys, r.call.args, w.of, w.keys, w.args)
		}
	}
	// The callers' own slices are left as they were.
	if got := calls[0].args; !slices.Equal(got, []any{"m1", "P"}) {
		t.Errorf("the first call's arguments became %q", got)
	}
}
