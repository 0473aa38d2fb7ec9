package auth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
)

func newSessions(t testing.TB, secret []byte) *auth.Sessions {
	t.Helper()
	s, err := auth.NewSessions(secret)
	if err != nil {
		t.Fatalf("NewSessions: %v", err)
	}
	return s
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// forge builds a token from a raw header and payload, signed with HMAC over secret using
// newHash (sha256.New for HS256).
func forge(secret []byte, newHash func() hash.Hash, header, payload string) string {
	signing := b64(header) + "." + b64(payload)
	m := hmac.New(newHash, secret)
	m.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

const hs256 = `{"alg":"HS256","typ":"JWT"}`

func claimsJSON(sub string, iat, exp time.Time) string {
	return fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, sub, iat.Unix(), exp.Unix())
}

func TestNewSessionsSecretLength(t *testing.T) {
	tests := []struct {
		n      int
		wantOK bool
	}{{0, false}, {1, false}, {auth.MinSessionSecret - 1, false}, {auth.MinSessionSecret, true}, {64, true}}
	for _, tt := range tests {
		s, err := auth.NewSessions(make([]byte, tt.n))
		if tt.wantOK != (err == nil) || tt.wantOK != (s != nil) {
			t.Errorf("NewSessions(%d bytes) = %v, %v; want ok %v", tt.n, s, err, tt.wantOK)
		}
	}
	if _, err := auth.NewSessions(nil); err == nil {
		t.Error("NewSessions(nil) succeeded")
	}
}

func TestSessionsCopiesSecret(t *testing.T) {
	secret := append([]byte(nil), testSecret...)
	s := newSessions(t, secret)
	tok, err := s.Issue("acct_1", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i := range secret {
		secret[i] = 'x'
	}
	if _, err := s.Verify(tok, t0); err != nil {
		t.Fatalf("changing the caller's secret slice broke verification: %v", err)
	}
}

func TestSessionsRoundTrip(t *testing.T) {
	s := newSessions(t, testSecret)
	tests := []struct {
		account string
		ttl     time.Duration
		at      time.Duration // after t0
	}{
		{"acct_1", time.Hour, 0},
		{"acct_1", time.Hour, time.Hour - time.Second},
		{"acct_1", time.Hour, time.Hour - time.Nanosecond},
		{"a", time.Second, 0},
		{"x_" + strings.Repeat("9", 62), 30 * 24 * time.Hour, 29 * 24 * time.Hour},
		{`odd "quoted" id`, time.Minute, 0},
	}
	for _, tt := range tests {
		tok, err := s.Issue(tt.account, t0, tt.ttl)
		if err != nil {
			t.Fatalf("Issue(%q): %v", tt.account, err)
		}
		if strings.Count(tok, ".") != 2 {
			t.Fatalf("Issue(%q) = %q is not a JWT", tt.account, tok)
		}
		got, err := s.Verify(tok, t0.Add(tt.at))
		if err != nil || got != tt.account {
			t.Fatalf("Verify(Issue(%q, ttl %v)) at +%v = %q, %v; want the account", tt.account, tt.ttl, tt.at, got, err)
		}
		// The token is accepted by the edge check as a session credential.
		if !strings.HasPrefix(tok, b64(hs256)+".") {
			t.Errorf("token header = %q; want HS256 JWT header", strings.Split(tok, ".")[0])
		}
	}
	// Two Sessions with the same secret accept each other's tokens.
	tok, _ := s.Issue("acct_2", t0, time.Hour)
	if got, err := newSessions(t, testSecret).Verify(tok, t0); err != nil || got != "acct_2" {
		t.Fatalf("another Sessions with the same secret: %q, %v", got, err)
	}
}

func TestSessionsIssueRefuses(t *testing.T) {
	s := newSessions(t, testSecret)
	for _, tt := range []struct {
		account string
		ttl     time.Duration
	}{{"", time.Hour}, {"acct", 0}, {"acct", -time.Second}} {
		if tok, err := s.Issue(tt.account, t0, tt.ttl); err == nil || tok != "" {
			t.Errorf("Issue(%q, %v) = %q, %v; want an error", tt.account, tt.ttl, tok, err)
		}
	}
}

func TestSessionsVerifyRefuses(t *testing.T) {
	s := newSessions(t, testSecret)
	good, err := s.Issue("acct_1", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := s.Issue("acct_2", t0, time.Hour)
	wrong, _ := newSessions(t, []byte("ffffffffffffffffffffffffffffffff")).Issue("acct_1", t0, time.Hour)
	future, _ := s.Issue("acct_1", t0.Add(time.Minute+time.Second), time.Hour)
	parts := strings.Split(good, ".")
	otherParts := strings.Split(other, ".")
	sig := parts[2]

	// flip replaces the character at i of s by another base64url character whose top
	// bits differ, so the decoded bytes change.
	flip := func(s string, i int) string {
		c := byte('A')
		if s[i] == 'A' {
			c = 'z'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	// sameBits replaces the last character of a segment by one that differs only in
	// the padding bits a lenient decoder ignores.
	sameBits := func(seg string) string {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		last := strings.IndexByte(alphabet, seg[len(seg)-1])
		return seg[:len(seg)-1] + string(alphabet[last^1])
	}

	tests := []struct {
		name  string
		token string
		now   time.Time
	}{
		{"expired exactly at exp", good, t0.Add(time.Hour)},
		{"expired after exp", good, t0.Add(2 * time.Hour)},
		{"issued more than a minute in the future", future, t0},
		{"tampered payload", parts[0] + "." + otherParts[1] + "." + sig, t0},
		{"tampered payload, one character", parts[0] + "." + flip(parts[1], 5) + "." + sig, t0},
		{"tampered header", flip(parts[0], 3) + "." + parts[1] + "." + sig, t0},
		{"tampered signature", parts[0] + "." + parts[1] + "." + flip(sig, 0), t0},
		{"tampered signature, last character", parts[0] + "." + parts[1] + "." + flip(sig, len(sig)-1), t0},
		{"non-canonical signature encoding", parts[0] + "." + parts[1] + "." + sameBits(sig), t0},
		{"newline inside the signature", parts[0] + "." + parts[1] + "." + sig[:10] + "\n" + sig[10:], t0},
		{"CR inside the signature", parts[0] + "." + parts[1] + "." + sig[:10] + "\r" + sig[10:], t0},
		{"padded signature", good + "=", t0},
		{"truncated signature", good[:len(good)-1], t0},
		{"empty signature", parts[0] + "." + parts[1] + ".", t0},
		{"signature of another token", parts[0] + "." + parts[1] + "." + otherParts[2], t0},
		{"wrong secret", wrong, t0},
		{"alg none, unsigned", b64(`{"alg":"none","typ":"JWT"}`) + "." + parts[1] + ".", t0},
		{"alg none, HS256 signature", forge(testSecret, sha256.New, `{"alg":"none","typ":"JWT"}`, claimsJSON("acct_1", t0, t0.Add(time.Hour))), t0},
		{"alg HS512, HS512 signature", forge(testSecret, sha512.New, `{"alg":"HS512","typ":"JWT"}`, claimsJSON("acct_1", t0, t0.Add(time.Hour))), t0},
		{"alg HS512, HS256 signature", forge(testSecret, sha256.New, `{"alg":"HS512","typ":"JWT"}`, claimsJSON("acct_1", t0, t0.Add(time.Hour))), t0},
		{"alg RS256", forge(testSecret, sha256.New, `{"alg":"RS256","typ":"JWT"}`, claimsJSON("acct_1", t0, t0.Add(time.Hour))), t0},
		{"alg hs256 lowercase", forge(testSecret, sha256.New, `{"alg":"hs256"}`, claimsJSON("acct_1", t0, t0.Add(time.Hour))), t0},
		{"no alg", forge(testSecret, sha256.New, `{"typ":"JWT"}`, claimsJSON("acct_1", t0, t0.Add(time.Hour))), t0},
		{"header not JSON", forge(testSecret, sha256.New, `HS256`, claimsJSON("acct_1", t0, t0.Add(time.Hour))), t0},
		{"missing sub", forge(testSecret, sha256.New, hs256, fmt.Sprintf(`{"iat":%d,"exp":%d}`, t0.Unix(), t0.Add(time.Hour).Unix())), t0},
		{"empty sub", forge(testSecret, sha256.New, hs256, claimsJSON("", t0, t0.Add(time.Hour))), t0},
		{"missing exp", forge(testSecret, sha256.New, hs256, fmt.Sprintf(`{"sub":"acct_1","iat":%d}`, t0.Unix())), t0},
		{"exp zero", forge(testSecret, sha256.New, hs256, fmt.Sprintf(`{"sub":"acct_1","iat":%d,"exp":0}`, t0.Unix())), t0},
		{"exp negative", forge(testSecret, sha256.New, hs256, fmt.Sprintf(`{"sub":"acct_1","iat":%d,"exp":-1}`, t0.Unix())), t0},
		{"exp a string", forge(testSecret, sha256.New, hs256, `{"sub":"acct_1","exp":"never"}`), t0},
		{"sub a number", forge(testSecret, sha256.New, hs256, fmt.Sprintf(`{"sub":7,"exp":%d}`, t0.Add(time.Hour).Unix())), t0},
		{"claims not JSON", forge(testSecret, sha256.New, hs256, `sub=acct_1`), t0},
		{"claims JSON array", forge(testSecret, sha256.New, hs256, `["acct_1"]`), t0},
		{"claims with trailing data", forge(testSecret, sha256.New, hs256, claimsJSON("acct_1", t0, t0.Add(time.Hour))+"x"), t0},
		{"iat in the future", forge(testSecret, sha256.New, hs256, claimsJSON("acct_1", t0.Add(2*time.Minute), t0.Add(time.Hour))), t0},
		{"empty", "", t0},
		{"garbage", "not a token", t0},
		{"one dot", "abc.def", t0},
		{"three dots", good + ".x", t0},
		{"dots only", "..", t0},
		{"raw key", lowerKey, t0},
		{"too long", good + strings.Repeat("A", 4096), t0},
		{"header not base64", "!!!." + parts[1] + "." + sig, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Verify(tt.token, tt.now)
			if err == nil || got != "" {
				t.Fatalf("Verify(%q) at %v = %q, %v; want ErrInvalidSession", tt.token, tt.now, got, err)
			}
			if !errors.Is(err, auth.ErrInvalidSession) {
				t.Fatalf("Verify error %v does not match ErrInvalidSession", err)
			}
		})
	}

	// The boundaries of the accepted cases, as controls.
	if _, err := s.Verify(good, t0.Add(time.Hour-time.Second)); err != nil {
		t.Errorf("one second before exp: %v", err)
	}
	atSkew, _ := s.Issue("acct_1", t0.Add(time.Minute), time.Hour)
	if _, err := s.Verify(atSkew, t0); err != nil {
		t.Errorf("iat exactly one minute ahead: %v", err)
	}
	if got, err := s.Verify(forge(testSecret, sha256.New, hs256, claimsJSON("acct_9", t0, t0.Add(time.Hour))), t0); err != nil || got != "acct_9" {
		t.Errorf("a hand-made HS256 token with the right secret = %q, %v; want acct_9", got, err)
	}
}

// FuzzVerify checks that Verify never panics and accepts nothing but the tokens Issue
// produced with the same secret.
func FuzzVerify(f *testing.F) {
	s := newSessions(f, testSecret)
	valid := map[string]string{}
	for _, acct := range []string{"acct_1", "acct_2", "a"} {
		tok, err := s.Issue(acct, t0, time.Hour)
		if err != nil {
			f.Fatal(err)
		}
		valid[tok] = acct
		f.Add(tok)
		parts := strings.Split(tok, ".")
		f.Add(parts[0] + "." + parts[1] + ".")
		f.Add(parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + "B")
		f.Add(parts[0] + "." + parts[1] + "." + parts[2][:20] + "\n" + parts[2][20:])
		f.Add(tok + "=")
		f.Add(strings.ToUpper(tok))
	}
	f.Add("")
	f.Add("..")
	f.Add("a.b.c")
	f.Add(b64(`{"alg":"none"}`) + "." + b64(`{"sub":"acct_1","exp":9999999999}`) + ".")
	f.Add(forge([]byte("ffffffffffffffffffffffffffffffff"), sha256.New, hs256, claimsJSON("acct_1", t0, t0.Add(time.Hour))))
	now := t0.Add(30 * time.Minute)
	f.Fuzz(func(t *testing.T, token string) {
		got, err := s.Verify(token, now)
		if err != nil {
			if !errors.Is(err, auth.ErrInvalidSession) {
				t.Fatalf("Verify(%q) error %v does not match ErrInvalidSession", token, err)
			}
			if got != "" {
				t.Fatalf("Verify(%q) failed but returned %q", token, got)
			}
			return
		}
		want, ok := valid[token]
		if !ok {
			t.Fatalf("Verify accepted %q (account %q), which Issue did not produce", token, got)
		}
		if got != want {
			t.Fatalf("Verify(%q) = %q; want %q", token, got, want)
		}
	})
}
