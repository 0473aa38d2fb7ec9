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
