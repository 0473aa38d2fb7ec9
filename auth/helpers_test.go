package auth_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
)

// t0 is the fixed instant every test measures time from.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// testSecret is a session secret of exactly MinSessionSecret bytes.
var testSecret = []byte("0123456789abcdef0123456789abcdef")

// mustRestrictions builds restrictions or fails the test.
func mustRestrictions(t testing.TB, spec auth.RestrictionSpec) auth.Restrictions {
	t.Helper()
	r, err := auth.NewRestrictions(spec)
	if err != nil {
		t.Fatalf("NewRestrictions(%+v): %v", spec, err)
	}
	return r
}

// at returns a pointer to t, for RestrictionSpec.ExpiresAt.
func at(t time.Time) *time.Time { return &t }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}
