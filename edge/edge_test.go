package edge_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/wire"
)

const key = "9b2f6c1e-4a7d-4e0b-8f3a-2c5d1e7f9a10"

func TestNewRefusesBadSettings(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts edge.Options
		want string // "" for none
	}{
		{"zero", edge.Options{}, ""},
		{"origins", edge.Options{AllowedOrigins: []string{"https://app.example", "http://localhost:3000/"}}, ""},
		{"star", edge.Options{AllowedOrigins: []string{"https://app.example", "*"}}, ""},
		{"no scheme", edge.Options{AllowedOrigins: []string{"app.example"}}, `"app.example" is not an origin`},
		{"list in one", edge.Options{AllowedOrigins: []string{"https://a.example, https://b.example"}}, "is not an origin"},
		{"empty", edge.Options{AllowedOrigins: []string{""}}, `"" is not an origin`},
		{"bad prefix", edge.Options{TrustedProxies: []netip.Prefix{{}}}, "invalid prefix"},
		{"star first, then a bad one", edge.Options{AllowedOrigins: []string{"*", "bogus value"}}, "is not an origin"},
		{"a path", edge.Options{AllowedOrigins: []string{"https://a.example/app"}}, "is not an origin"},
		{"no host", edge.Options{AllowedOrigins: []string{"https://"}}, "is not an origin"},
		{"another scheme", edge.Options{AllowedOrigins: []string{"ftp://a.example"}}, "is not an origin"},
		{"user information", edge.Options{AllowedOrigins: []string{"https://me@a.example"}}, "is not an origin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := edge.New(&tt.opts)
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestCaller: the edge check answers a request without a well-formed credential with the
// bare 403, and reads the client's address through the trusted proxies only.
func TestCaller(t *testing.T) {
	e, err := edge.New(&edge.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	d := e.Door(edge.DoorSpec{Methods: "GET, OPTIONS"})
	for _, tt := range []struct {
		name     string
		remote   string
		hdr      map[string]string
		ok       bool
		addr     string
		fromPeer bool
	}{
		{"no credential", "192.0.2.1:1", nil, false, "", false},
		{"malformed key", "192.0.2.1:1", map[string]string{"X-Api-Key": "not-a-key"}, false, "", false},
		{"key, direct", "192.0.2.1:1", map[string]string{"X-Api-Key": key, "X-Forwarded-For": "198.51.100.7"}, true, "192.0.2.1", false},
		{"key, through a trusted proxy", "10.1.2.3:1", map[string]string{"Authorization": "Bearer " + key, "X-Forwarded-For": "198.51.100.7"}, true, "198.51.100.7", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			r.Header.Set("Origin", "https://app.example")
			for k, v := range tt.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			c, ok := d.Caller(w, r, auth.ChannelREST)
			if ok != tt.ok {
				t.Fatalf("Caller ok = %v, want %v", ok, tt.ok)
			}
			if got := e.FromTrustedProxy(r); got != tt.fromPeer {
				t.Errorf("FromTrustedProxy = %v, want %v", got, tt.fromPeer)
			}
			if !ok {
				wantBare403(t, w)
				return
			}
			if c.Addr.String() != tt.addr || c.Channel != auth.ChannelREST || c.Credential.Value != key {
				t.Errorf("Caller = %+v, want the key from %s over REST", c, tt.addr)
			}
		})
	}
}

func wantBare403(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code != http.StatusForbidden || w.Header().Get("Content-Type") != "text/html" ||
		!strings.Contains(w.Body.String(), "403 Forbidden") {
		t.Errorf("the edge answered %d %q %s, want the bare 403", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	for name := range w.Header() {
		if strings.HasPrefix(name, "Access-Control-") || name == "Vary" || name == wire.HeaderErrorCode {
			t.Errorf("the bare 403 carries %s", name)
		}
	}
}

// TestDenyRemovesCORS: a door that wrote its CORS headers before it learned that the
// credential is malformed still answers the bare 403 without them.
func TestDenyRemovesCORS(t *testing.T) {
	d := edge.Default().Door(edge.DoorSpec{Methods: "POST"})
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Origin", "https://app.example")
	w := httptest.NewRecorder()
	d.CORS(w.Header(), r)
	if w.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Fatal("no CORS headers to remove")
	}
	d.WriteError(w, r, &tollgate.Error{Code: tollgate.CodeMalformedCredential, Message: "malformed"}, nil)
	wantBare403(t, w)
}

// TestDoorWithoutCORS: a door that answers no cross-origin call writes no CORS header,
// reports a cross-origin request refused, and a preflight allows nothing.
func TestDoorWithoutCORS(t *testing.T) {
	d := edge.Default().Door(edge.DoorSpec{})
	r := httptest.NewRequest(http.MethodOptions, "/", nil)
	r.Header.Set("Origin", "https://app.example")
	w := httptest.NewRecorder()
	if d.CORS(w.Header(), r) {
		t.Error("a cross-origin request is allowed by a door without CORS")
	}
	d.Preflight(w, r)
	if len(w.Header()) != 0 || w.Code != http.StatusNoContent {
		t.Errorf("preflight: %d %v, want an empty 204", w.Code, w.Header())
	}
	if !d.CORS(http.Header{}, httptest.NewRequest(http.MethodGet, "/", nil)) {
		t.Error("a same-origin request is refused")
	}
}

// TestPreflight: a door's preflight allows its methods and the headers of every door
// with its own, and exposes its own headers besides the wire's.
func TestPreflight(t *testing.T) {
	d := edge.Default().Door(edge.DoorSpec{Methods: "GET, DELETE", AllowHeaders: []string{"Mcp-Session-Id"}, ExposeHeaders: []string{"WWW-Authenticate"}})
	r := httptest.NewRequest(http.MethodOptions, "/", nil)
	r.Header.Set("Origin", "https://app.example")
	w := httptest.NewRecorder()
	d.Preflight(w, r)
	hdr := w.Header()
	if w.Code != http.StatusNoContent || hdr.Get("Access-Control-Allow-Methods") != "GET, DELETE" ||
		hdr.Get("Access-Control-Allow-Headers") != "X-Api-Key, Authorization, X-Jwt, Content-Type, Accept, X-Auth-Mode, Idempotency-Key, X-Request-Id, Mcp-Session-Id" {
		t.Errorf("preflight %d %v", w.Code, hdr)
	}
	if got := hdr.Get("Access-Control-Expose-Headers"); !strings.HasSuffix(got, ", WWW-Authenticate") || !strings.HasPrefix(got, "X-Error-Code, ") {
		t.Errorf("Expose-Headers %q", got)
	}
}

// TestReceipt: a door writes the IETF rate headers when its edge asks for them, on
// every receipt with a rate decision.
func TestReceipt(t *testing.T) {
	plan := billing.Plan{Name: "pro", Credits: 100, RatePerMinute: 60}
	rc := &tollgate.Receipt{Plan: plan, Charged: 1,
		Balance: billing.Balance{Remaining: 99, Used: 1, Allowance: 100},
		Rate:    billing.RateDecision{Allowed: true, Remaining: 59, ResetAfter: time.Second}}
	for _, ietf := range []bool{false, true} {
		e, err := edge.New(&edge.Options{IETFRateHeaders: ietf})
		if err != nil {
			t.Fatal(err)
		}
		hdr := http.Header{}
		e.Door(edge.DoorSpec{}).Receipt(hdr, rc)
		if hdr.Get(wire.HeaderCreditsCost) != "1" || hdr.Get(wire.HeaderRateLimitRemaining) != "59" {
			t.Errorf("receipt headers %v", hdr)
		}
		if got := hdr.Get(wire.HeaderRateLimitIETF) != ""; got != ietf {
			t.Errorf("IETF %v: RateLimit written %v (%v)", ietf, got, hdr)
		}
	}
}

// TestAllowedOrigins: an origin is compared as a browser sends it (lower case, no
// default port, no trailing slash), and "*" anywhere in the list allows every origin.
func TestAllowedOrigins(t *testing.T) {
	for _, tt := range []struct {
		name    string
		list    []string
		origin  string
		allowed string // the Access-Control-Allow-Origin written, "" for none
	}{
		{"as written", []string{"https://app.example"}, "https://app.example", "https://app.example"},
		{"upper case and default port", []string{"HTTPS://App.Example:443/"}, "https://app.example", "https://app.example"},
		{"another port", []string{"http://localhost:3000"}, "http://localhost:3000", "http://localhost:3000"},
		{"not listed", []string{"https://app.example"}, "https://b.example", ""},
		{"star after an origin", []string{"https://a.example", "*"}, "https://b.example", "*"},
		{"IPv6", []string{"http://[::1]:8080"}, "http://[::1]:8080", "http://[::1]:8080"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := edge.New(&edge.Options{AllowedOrigins: tt.list})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Origin", tt.origin)
			hdr := http.Header{}
			e.Door(edge.DoorSpec{Methods: "GET"}).CORS(hdr, r)
			if got := hdr.Get("Access-Control-Allow-Origin"); got != tt.allowed {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tt.allowed)
			}
		})
	}
}
