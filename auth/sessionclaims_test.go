package auth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
)

func TestSessionClaimsRoundTrip(t *testing.T) {
	s := newSessions(t, testSecret)
	h := auth.HashKey(auth.NewKeyValue())
	tests := []struct {
		name  string
		c     auth.SessionClaims
		hash  *auth.Hash
		bound bool
	}{
		{"account", auth.SessionClaims{Account: "acct_1"}, nil, false},
		{"key by id", auth.SessionClaims{Account: "acct_1", KeyID: "key_1"}, nil, false},
		{"key bound", auth.SessionClaims{Account: "acct_1", KeyID: "key_1"}, &h, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.IssuedAt, tt.c.Expires = t0, t0.Add(time.Hour)
			tok, issued, err := s.IssueClaims(tt.c, tt.hash)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Parse(tok, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID == "" || got.ID != issued.ID || got.Account != "acct_1" || got.KeyID != tt.c.KeyID ||
				got.KeyBound != tt.bound || !got.Expires.Equal(t0.Add(time.Hour)) {
				t.Errorf("Parse = %+v, issued %+v", got, issued)
			}
			if !s.BoundTo(got, h) {
				t.Error("BoundTo(the key's hash) = false")
			}
			if other := auth.HashKey(auth.NewKeyValue()); s.BoundTo(got, other) == tt.bound {
				t.Errorf("BoundTo(another hash) = %v for a session bound %v", !tt.bound, tt.bound)
			}
			if strings.Contains(tok, h.String()) || strings.Contains(tok, base64.RawURLEncoding.EncodeToString(h[:])) {
				t.Error("the token holds the key's hash")
			}
		})
	}
}

func TestIssueClaimsRefuses(t *testing.T) {
	s := newSessions(t, testSecret)
	h := auth.HashKey(auth.NewKeyValue())
	for name, tc := range map[string]struct {
		c auth.SessionClaims
		h *auth.Hash
	}{
		"no account":      {auth.SessionClaims{IssuedAt: t0, Expires: t0.Add(time.Hour)}, nil},
		"no lifetime":     {auth.SessionClaims{Account: "a", IssuedAt: t0, Expires: t0}, nil},
		"binding, no key": {auth.SessionClaims{Account: "a", IssuedAt: t0, Expires: t0.Add(time.Hour)}, &h},
		"bad id":          {auth.SessionClaims{ID: "x", Account: "a", IssuedAt: t0, Expires: t0.Add(time.Hour)}, nil},
	} {
		if _, _, err := s.IssueClaims(tc.c, tc.h); err == nil {
			t.Errorf("%s: IssueClaims succeeded", name)
		}
	}
}

// TestSessionChangedClaims checks that a token whose claims were changed after signing
// (another key, another session, no binding) is refused.
func TestSessionChangedClaims(t *testing.T) {
	s := newSessions(t, testSecret)
	h := auth.HashKey(auth.NewKeyValue())
	tok, _, err := s.IssueClaims(auth.SessionClaims{Account: "acct_1", KeyID: "key_1", IssuedAt: t0, Expires: t0.Add(time.Hour)}, &h)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, _ := strings.Cut(tok, ".")
	body, sig, _ := strings.Cut(rest, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	for _, change := range []struct{ from, to string }{
		{`"kid":"key_1"`, `"kid":"key_2"`},
		{`"sub":"acct_1"`, `"sub":"acct_2"`},
		{`"kbd":`, `"xkbd":`},
	} {
		changed := strings.Replace(string(raw), change.from, change.to, 1)
		if changed == string(raw) {
			t.Fatalf("the claims %s hold no %s", raw, change.from)
		}
		forged := head + "." + b64(changed) + "." + sig
		if _, err := s.Parse(forged, t0); !errors.Is(err, auth.ErrInvalidSession) {
			t.Errorf("claims changed %s -> %s: Parse = %v, want ErrInvalidSession", change.from, change.to, err)
		}
	}
	// A binding without a key, even signed, is refused.
	bad := forge(testSecret, sha256.New, hs256, `{"sub":"a","kbd":"x","iat":`+unix(t0)+`,"exp":`+unix(t0.Add(time.Hour))+`}`)
	if _, err := s.Parse(bad, t0); !errors.Is(err, auth.ErrInvalidSession) {
		t.Errorf("a binding without a key: Parse = %v, want ErrInvalidSession", err)
	}
	if _, err := s.Parse(tok, t0.Add(time.Hour)); !errors.Is(err, auth.ErrSessionExpired) {
		t.Errorf("at its expiry: Parse = %v, want ErrSessionExpired", err)
	}
}

func TestCSRFToken(t *testing.T) {
	s, other := newSessions(t, testSecret), newSessions(t, []byte(strings.Repeat("o", 32)))
	a, b := auth.NewSessionID(), auth.NewSessionID()
	ta := s.CSRFToken(a)
	tests := []struct {
		name string
		id   string
		tok  string
		want bool
	}{
		{"its own", a, ta, true},
		{"another session's", b, ta, false},
		{"empty", a, "", false},
		{"no session", "", s.CSRFToken(""), false},
		{"another secret's", a, other.CSRFToken(a), false},
		{"truncated", a, ta[:len(ta)-1], false},
	}
	for _, tt := range tests {
		if got := s.CheckCSRF(tt.id, tt.tok); got != tt.want {
			t.Errorf("%s: CheckCSRF = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
