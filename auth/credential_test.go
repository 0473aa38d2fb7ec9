package auth_test

import (
	"bufio"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/auth"
)

const (
	otherKey = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
	jwtLike  = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhY2N0In0.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
)

func TestCredentialFrom(t *testing.T) {
	type hdr struct{ name, value string }
	tests := []struct {
		name    string
		headers []hdr
		want    auth.Credential
		wantErr error
	}{
		// x-api-key
		{"x-api-key alone", []hdr{{"x-api-key", lowerKey}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"x-api-key uppercase value is lowered", []hdr{{"x-api-key", upperKey}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"X-API-KEY header name", []hdr{{"X-API-KEY", mixedKey}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"X-Api-Key header name", []hdr{{"X-Api-Key", lowerKey}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"x-api-key whitespace trimmed", []hdr{{"x-api-key", " \t" + lowerKey + " \t"}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"two x-api-key headers: the first is used", []hdr{{"x-api-key", lowerKey}, {"x-api-key", otherKey}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},

		// Authorization: Bearer
		{"Bearer", []hdr{{"Authorization", "Bearer " + lowerKey}}, auth.Credential{Kind: auth.BearerHeader, Value: lowerKey}, nil},
		{"bearer lowercase scheme", []hdr{{"authorization", "bearer " + upperKey}}, auth.Credential{Kind: auth.BearerHeader, Value: lowerKey}, nil},
		{"BEARER uppercase scheme", []hdr{{"AUTHORIZATION", "BEARER " + lowerKey}}, auth.Credential{Kind: auth.BearerHeader, Value: lowerKey}, nil},
		{"bEaReR mixed scheme", []hdr{{"Authorization", "bEaReR " + lowerKey}}, auth.Credential{Kind: auth.BearerHeader, Value: lowerKey}, nil},
		{"Bearer token whitespace trimmed", []hdr{{"Authorization", "Bearer    " + lowerKey + "  "}}, auth.Credential{Kind: auth.BearerHeader, Value: lowerKey}, nil},
		{"Bearer with no token is absent", []hdr{{"Authorization", "Bearer"}}, auth.Credential{}, auth.ErrNoCredential},
		{"Bearer with blank token is absent", []hdr{{"Authorization", "Bearer    "}}, auth.Credential{}, auth.ErrNoCredential},
		{"Bearer glued to the token is not Bearer", []hdr{{"Authorization", "Bearer" + lowerKey}}, auth.Credential{}, auth.ErrNoCredential},
		{"Basic is skipped", []hdr{{"Authorization", "Basic dXNlcjpwYXNzd29yZA=="}}, auth.Credential{}, auth.ErrNoCredential},
		{"Basic is skipped for x-jwt", []hdr{{"Authorization", "Basic dXNlcjpwYXNzd29yZA=="}, {"x-jwt", jwtLike}}, auth.Credential{Kind: auth.SessionHeader, Value: jwtLike}, nil},
		{"Bearer carrying a JWT is malformed", []hdr{{"Authorization", "Bearer " + jwtLike}}, auth.Credential{}, auth.ErrMalformedCredential},

		// x-jwt
		{"x-jwt", []hdr{{"x-jwt", jwtLike}}, auth.Credential{Kind: auth.SessionHeader, Value: jwtLike}, nil},
		{"X-JWT header name", []hdr{{"X-JWT", jwtLike}}, auth.Credential{Kind: auth.SessionHeader, Value: jwtLike}, nil},
		{"x-jwt whitespace trimmed", []hdr{{"x-jwt", "  " + jwtLike + "\t"}}, auth.Credential{Kind: auth.SessionHeader, Value: jwtLike}, nil},
		{"x-jwt of the largest size", []hdr{{"x-jwt", "a." + strings.Repeat("b", 4092) + ".c"}}, auth.Credential{Kind: auth.SessionHeader, Value: "a." + strings.Repeat("b", 4092) + ".c"}, nil},
		{"x-jwt two segments", []hdr{{"x-jwt", "abc.def"}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-jwt four segments", []hdr{{"x-jwt", "a.b.c.d"}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-jwt empty segment", []hdr{{"x-jwt", "a..c"}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-jwt empty last segment (alg none)", []hdr{{"x-jwt", "a.b."}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-jwt padded base64", []hdr{{"x-jwt", "YQ==.Yg==.Yw=="}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-jwt standard base64 characters", []hdr{{"x-jwt", "a+b.c/d.e"}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-jwt inner space", []hdr{{"x-jwt", "a.b c.d"}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-jwt carrying a raw key", []hdr{{"x-jwt", lowerKey}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-jwt too long", []hdr{{"x-jwt", "a." + strings.Repeat("b", 4093) + ".c"}}, auth.Credential{}, auth.ErrMalformedCredential},

		// Precedence: x-api-key, then Bearer, then x-jwt; several forms are not an error.
		{"x-api-key over Bearer and x-jwt", []hdr{{"x-jwt", jwtLike}, {"Authorization", "Bearer " + otherKey}, {"x-api-key", lowerKey}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"x-api-key over Bearer", []hdr{{"Authorization", "Bearer " + otherKey}, {"x-api-key", lowerKey}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"x-api-key over x-jwt", []hdr{{"x-jwt", jwtLike}, {"x-api-key", lowerKey}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"Bearer over x-jwt", []hdr{{"x-jwt", jwtLike}, {"Authorization", "Bearer " + otherKey}}, auth.Credential{Kind: auth.BearerHeader, Value: otherKey}, nil},
		{"same key in x-api-key and Bearer", []hdr{{"x-api-key", lowerKey}, {"Authorization", "Bearer " + lowerKey}}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"malformed x-api-key beats a valid Bearer", []hdr{{"x-api-key", "undefined"}, {"Authorization", "Bearer " + lowerKey}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"malformed x-api-key beats a valid x-jwt", []hdr{{"x-api-key", "YOUR_API_KEY"}, {"x-jwt", jwtLike}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"malformed Bearer beats a valid x-jwt", []hdr{{"Authorization", "Bearer undefined"}, {"x-jwt", jwtLike}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"empty x-api-key is absent: Bearer used", []hdr{{"x-api-key", ""}, {"Authorization", "Bearer " + lowerKey}}, auth.Credential{Kind: auth.BearerHeader, Value: lowerKey}, nil},
		{"blank x-api-key is absent: x-jwt used", []hdr{{"x-api-key", "   "}, {"x-jwt", jwtLike}}, auth.Credential{Kind: auth.SessionHeader, Value: jwtLike}, nil},
		{"blank x-jwt is absent", []hdr{{"x-jwt", " \t "}}, auth.Credential{}, auth.ErrNoCredential},

		// The edge check.
		{"no headers", nil, auth.Credential{}, auth.ErrNoCredential},
		{"unrelated headers", []hdr{{"Accept", "application/json"}, {"x-api-token", lowerKey}, {"api-key", lowerKey}}, auth.Credential{}, auth.ErrNoCredential},
		{"empty x-api-key alone", []hdr{{"x-api-key", ""}}, auth.Credential{}, auth.ErrNoCredential},
		{"x-api-key undefined", []hdr{{"x-api-key", "undefined"}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-api-key placeholder", []hdr{{"x-api-key", "YOUR_API_KEY"}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-api-key truncated", []hdr{{"x-api-key", lowerKey[:35]}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-api-key braces", []hdr{{"x-api-key", "{" + lowerKey + "}"}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"x-api-key quoted", []hdr{{"x-api-key", `"` + lowerKey + `"`}}, auth.Credential{}, auth.ErrMalformedCredential},
		{"Bearer placeholder", []hdr{{"Authorization", "Bearer <API_KEY>"}}, auth.Credential{}, auth.ErrMalformedCredential},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := make(http.Header)
			for _, kv := range tt.headers {
				h.Add(kv.name, kv.value)
			}
			got, err := auth.CredentialFrom(h)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("CredentialFrom(%v) error = %v; want %v", h, err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("CredentialFrom(%v) = %+v; want %+v", h, got, tt.want)
			}
		})
	}
}

// TestCredentialFromWireHeaders parses requests as a client wrote them, so header names
// arrive in whatever case the client chose.
func TestCredentialFromWireHeaders(t *testing.T) {
	tests := []struct {
		name    string
		lines   []string
		want    auth.Credential
		wantErr error
	}{
		{"lowercase x-api-key", []string{"x-api-key: " + upperKey}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"uppercase X-API-KEY", []string{"X-API-KEY: " + lowerKey}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"odd-case x-Api-KEY", []string{"x-Api-KEY:" + lowerKey}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"lowercase authorization", []string{"authorization: bearer " + lowerKey}, auth.Credential{Kind: auth.BearerHeader, Value: lowerKey}, nil},
		{"uppercase AUTHORIZATION", []string{"AUTHORIZATION: BEARER " + lowerKey}, auth.Credential{Kind: auth.BearerHeader, Value: lowerKey}, nil},
		{"uppercase X-JWT", []string{"X-JWT: " + jwtLike}, auth.Credential{Kind: auth.SessionHeader, Value: jwtLike}, nil},
		{"all three, odd cases", []string{"X-jwt: " + jwtLike, "authorization: Bearer " + otherKey, "X-API-key: " + lowerKey}, auth.Credential{Kind: auth.APIKeyHeader, Value: lowerKey}, nil},
		{"empty x-api-key line", []string{"x-api-key:", "Authorization: Bearer " + lowerKey}, auth.Credential{Kind: auth.BearerHeader, Value: lowerKey}, nil},
		{"Basic only", []string{"authorization: basic dXNlcjpwYXNz"}, auth.Credential{}, auth.ErrNoCredential},
		{"undefined", []string{"x-api-key: undefined"}, auth.Credential{}, auth.ErrMalformedCredential},
		{"none", nil, auth.Credential{}, auth.ErrNoCredential},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := "GET /v1/echo HTTP/1.1\r\nHost: example.com\r\n"
			for _, l := range tt.lines {
				raw += l + "\r\n"
			}
			raw += "\r\n"
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
			if err != nil {
				t.Fatalf("ReadRequest: %v", err)
			}
			got, err := auth.CredentialFrom(req.Header)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("error = %v; want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("credential = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestClientAddr(t *testing.T) {
	proxies := prefixes("10.0.0.0/8", "fd00::/8")
	tests := []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    netip.Addr
	}{
		// No trusted proxies: the TCP peer, whatever the headers say.
		{"IPv4 peer", "203.0.113.7:54321", nil, nil, addr("203.0.113.7")},
		{"IPv6 peer", "[2001:db8::7]:443", nil, nil, addr("2001:db8::7")},
		{"IPv4-mapped peer is unmapped", "[::ffff:203.0.113.7]:80", nil, nil, addr("203.0.113.7")},
		{"peer without a port", "203.0.113.7", nil, nil, addr("203.0.113.7")},
		{"IPv6 peer without a port", "2001:db8::7", nil, nil, addr("2001:db8::7")},
		{"unparseable peer", "not-an-address", nil, nil, netip.Addr{}},
		{"empty peer", "", nil, nil, netip.Addr{}},
		{"no trusted proxies ignores XFF", "10.0.0.1:1", []string{"198.51.100.1"}, nil, addr("10.0.0.1")},

		// A trusted proxy in front.
		{"trusted proxy, one hop", "10.0.0.1:1", []string{"198.51.100.1"}, proxies, addr("198.51.100.1")},
		{"trusted proxy, no XFF", "10.0.0.1:1", nil, proxies, addr("10.0.0.1")},
		{"chain client, proxy", "10.0.0.1:1", []string{"198.51.100.1, 10.0.0.2"}, proxies, addr("198.51.100.1")},
		{"chain without spaces", "10.0.0.1:1", []string{"198.51.100.1,10.0.0.2,10.0.0.3"}, proxies, addr("198.51.100.1")},
		{"several XFF headers", "10.0.0.1:1", []string{"198.51.100.1", "10.0.0.2"}, proxies, addr("198.51.100.1")},
		{"several XFF headers, right-most untrusted wins", "10.0.0.1:1", []string{"198.51.100.1, 10.0.0.3", "198.51.100.2"}, proxies, addr("198.51.100.2")},
		{"forged left-most entry ignored", "10.0.0.1:1", []string{"1.2.3.4, 198.51.100.1"}, proxies, addr("198.51.100.1")},
		{"forged trusted-looking entry ignored", "10.0.0.1:1", []string{"10.9.9.9, 198.51.100.1, 10.0.0.2"}, proxies, addr("198.51.100.1")},
		{"all hops trusted: the left-most", "10.0.0.1:1", []string{"10.0.0.3, 10.0.0.2"}, proxies, addr("10.0.0.3")},
		{"garbage right-most entry stops at the peer", "10.0.0.1:1", []string{"198.51.100.1, garbage"}, proxies, addr("10.0.0.1")},
		{"garbage stops at the last trusted hop", "10.0.0.1:1", []string{"garbage, 10.0.0.2"}, proxies, addr("10.0.0.2")},
		{"empty entry stops the walk", "10.0.0.1:1", []string{"198.51.100.1, , 10.0.0.2"}, proxies, addr("10.0.0.2")},
		{"trailing comma stops the walk", "10.0.0.1:1", []string{"198.51.100.1,"}, proxies, addr("10.0.0.1")},
		{"entry with a port is garbage", "10.0.0.1:1", []string{"198.51.100.1:5555"}, proxies, addr("10.0.0.1")},
		{"IPv4-mapped XFF entry unmapped", "10.0.0.1:1", []string{"::ffff:198.51.100.1"}, proxies, addr("198.51.100.1")},
		{"IPv6 client through an IPv6 proxy", "[fd00::1]:1", []string{"2001:db8::1"}, proxies, addr("2001:db8::1")},
		{"IPv4-mapped trusted peer", "[::ffff:10.0.0.1]:1", []string{"198.51.100.1"}, proxies, addr("198.51.100.1")},
		{"untrusted peer ignores XFF", "203.0.113.7:1", []string{"198.51.100.1"}, proxies, addr("203.0.113.7")},
		{"untrusted peer ignores a trusted-looking XFF", "203.0.113.7:1", []string{"10.0.0.2"}, proxies, addr("203.0.113.7")},
		{"unparseable peer is not trusted", "garbage", []string{"198.51.100.1"}, proxies, netip.Addr{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tt.remote, Header: make(http.Header)}
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := auth.ClientAddr(r, tt.trusted); got != tt.want {
				t.Fatalf("ClientAddr(remote %q, XFF %q) = %v; want %v", tt.remote, tt.xff, got, tt.want)
			}
		})
	}
}

func FuzzCredentialFrom(f *testing.F) {
	seeds := [][3]string{
		{lowerKey, "", ""},
		{upperKey, "Bearer " + otherKey, jwtLike},
		{"", "Bearer " + mixedKey, ""},
		{"", "bearer   " + lowerKey + " ", jwtLike},
		{"", "Basic dXNlcjpwYXNz", jwtLike},
		{"", "", jwtLike},
		{"", "", ""},
		{"undefined", "Bearer " + lowerKey, ""},
		{"YOUR_API_KEY", "", ""},
		{"   ", "Bearer", " . . "},
		{"", "Bearer ", "a.b.c"},
		{"", "", "a..c"},
		{"", "Bearer\t" + lowerKey, ""},
		{"{" + lowerKey + "}", "", ""},
		{"", "", "a." + strings.Repeat("b", 4093) + ".c"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, apiKey, authorization, jwt string) {
		h := make(http.Header)
		if apiKey != "" {
			h.Set("X-Api-Key", apiKey)
		}
		if authorization != "" {
			h.Set("authorization", authorization)
		}
		if jwt != "" {
			h.Set("x-jwt", jwt)
		}
		cred, err := auth.CredentialFrom(h)
		if err != nil {
			if !errors.Is(err, auth.ErrNoCredential) && !errors.Is(err, auth.ErrMalformedCredential) {
				t.Fatalf("CredentialFrom: error %v is not an edge error", err)
			}
			if cred != (auth.Credential{}) {
				t.Fatalf("CredentialFrom failed (%v) but returned %+v", err, cred)
			}
			if errors.Is(err, auth.ErrNoCredential) && (strings.TrimSpace(apiKey) != "" || strings.TrimSpace(jwt) != "") {
				t.Fatalf("ErrNoCredential with x-api-key %q and x-jwt %q present", apiKey, jwt)
			}
			return
		}
		switch cred.Kind {
		case auth.APIKeyHeader, auth.BearerHeader:
			v, ok := auth.ParseKey(cred.Value)
			if !ok || v != cred.Value || strings.ToLower(cred.Value) != cred.Value {
				t.Fatalf("key credential %+v is not a lowercase UUID", cred)
			}
			src := apiKey
			if cred.Kind == auth.BearerHeader {
				if strings.TrimSpace(apiKey) != "" {
					t.Fatalf("Bearer used although x-api-key %q is present", apiKey)
				}
				src = authorization
			}
			if !strings.Contains(strings.ToLower(src), cred.Value) {
				t.Fatalf("key %q was not taken from %q", cred.Value, src)
			}
		case auth.SessionHeader:
			if strings.TrimSpace(apiKey) != "" {
				t.Fatalf("x-jwt used although x-api-key %q is present", apiKey)
			}
			if cred.Value != strings.TrimSpace(jwt) || strings.Count(cred.Value, ".") != 2 {
				t.Fatalf("session credential %q does not come from x-jwt %q", cred.Value, jwt)
			}
		default:
			t.Fatalf("CredentialFrom returned kind %d", cred.Kind)
		}
	})
}
