package authn_test

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

// Well-formed key values that no test stores.
const (
	lowerKey = "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f"
	otherKey = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
)

func newSessions(t testing.TB, secret []byte) *auth.Sessions {
	t.Helper()
	s, err := auth.NewSessions(secret)
	if err != nil {
		t.Fatalf("NewSessions: %v", err)
	}
	return s
}

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
