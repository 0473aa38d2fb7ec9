package doortest

import (
	"cmp"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/wire"
)

// loopback are the addresses of the suite's own requests, trusted as proxies by the
// rows that forward an address.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// A row is one contract of the edge.
type row struct {
	name string
	// contract is the row's one-sentence contract, reported when it fails.
	contract string
	// applies reports whether the contract concerns the door; nil: every door.
	applies func(Door) bool
	run     func(t *testing.T, d Door)
}

var rows = []row{
	{
		name:     "NoCredential",
		contract: "A request without a credential gets the edge's bare 403 (HTML, no JSON, no CORS, no code), or the door's documented answer in its own shape.",
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{AllowedOrigins: []string{Origin}})
			resp, body := s.as().send(d.Call, origin(d)...)
			if d.Auth == AuthKey && d.NoCredential == 0 {
				wantBare403(t, resp, body)
				return
			}
			wantDoorsAnswer(t, d, resp, body, cmp.Or(d.NoCredential, http.StatusUnauthorized))
			if d.CORS {
				wantCORS(t, d, resp, Origin)
			}
		},
	},
	{
		name:     "MalformedKey",
		contract: "A request whose key is not shaped as one gets the edge's bare 403, whatever else it carries, or the door's documented answer in its own shape.",
		applies:  func(d Door) bool { return d.Auth == AuthKey },
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{})
			for _, pairs := range [][]string{
				{wire.HeaderAPIKey, "not-a-key"},
				{"Authorization", "Bearer " + Key + "x"},
				{wire.HeaderSession, "not.a.token!"},
			} {
				resp, body := s.as().send(d.Call, append(pairs, origin(d)...)...)
				if d.MalformedKey == 0 {
					wantBare403(t, resp, body)
				} else {
					wantDoorsAnswer(t, d, resp, body, d.MalformedKey)
				}
			}
		},
	},
	{
		name:     "Receipt",
		contract: "A successful call carries the credit and rate headers of its receipt (and only a door that meters calls writes them), and no error code.",
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{})
			resp, body := s.withKey(Key).send(d.Call)
			wantSuccess(t, resp, body)
			wantReceipt(t, d, resp.Header, false)
		},
	},
	{
		name:     "IETFRateHeaders",
		contract: "With the edge's IETF rate headers on, every successful call of a door that meters calls carries RateLimit and RateLimit-Policy too.",
		applies:  func(d Door) bool { return d.Receipts },
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{IETFRateHeaders: true})
			resp, body := s.withKey(Key).send(d.Call)
			wantSuccess(t, resp, body)
			wantReceipt(t, d, resp.Header, true)
		},
	},
	{
		name:     "Refusal",
		contract: "A refusal after authentication is in the door's documented shape, with its code, X-Error-Code and Cache-Control: no-store.",
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{})
			resp, body := s.withKey(Key).send(d.Refused)
			wantRefusal(t, d, resp, body, d.RefusedCode)
		},
	},
	{
		name:     "CORS",
		contract: "A door that answers cross-origin calls lets the edge's allowed origins read its answers, successes and refusals alike, and no other origin; a door that does not writes no CORS header.",
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{AllowedOrigins: []string{Origin}})
			c := s.withKey(Key)
			resp, body := c.send(d.Call, "Origin", Origin)
			if !d.CORS {
				// Served or refused as the door sees fit, never readable by the script.
				wantCORS(t, d, resp, Origin)
				return
			}
			wantSuccess(t, resp, body)
			wantCORS(t, d, resp, Origin)
			resp, body = c.send(d.Refused, "Origin", Origin)
			wantRefusal(t, d, resp, body, d.RefusedCode)
			wantCORS(t, d, resp, Origin)
			resp, body = c.send(d.Call, "Origin", Elsewhere)
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
				t.Errorf("an origin the edge does not allow may read the answer (Access-Control-Allow-Origin %q)\n%s", got, body)
			}
		},
	},
	{
		name:     "AnyOrigin",
		contract: "By default a door that answers cross-origin calls lets every origin read its answers (Access-Control-Allow-Origin: *, its headers exposed); a door that does not writes no CORS header.",
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{})
			resp, body := s.withKey(Key).send(d.Call, "Origin", Elsewhere)
			if !d.CORS {
				wantCORS(t, d, resp, Elsewhere)
				return
			}
			wantSuccess(t, resp, body)
			wantCORS(t, d, resp, "*")
		},
	},
	{
		name:     "Preflight",
		contract: "A CORS preflight needs no credential: a door that answers cross-origin calls allows the edge's origins its methods and the credential headers; a door that does not allows nothing.",
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{AllowedOrigins: []string{Origin}})
			resp, body := s.as().send(Request{Method: http.MethodOptions, Path: d.Call.Path,
				Header: http.Header{"Access-Control-Request-Method": {d.Call.Method}}}, "Origin", Origin)
			acao, methods := resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Allow-Methods")
			if !d.CORS {
				if acao != "" || methods != "" {
					t.Errorf("a door without CORS allows a preflight: %s %v", resp.Status, resp.Header)
				}
				return
			}
			allow := resp.Header.Get("Access-Control-Allow-Headers")
			if resp.StatusCode != http.StatusNoContent || acao != Origin || !strings.Contains(methods, d.Call.Method) ||
				!strings.Contains(allow, wire.HeaderAPIKey) || !strings.Contains(allow, wire.HeaderAuthorization) {
				t.Errorf("preflight answered %s %v %s", resp.Status, resp.Header, body)
			}
		},
	},
	{
		name:     "TrustedProxies",
		contract: "The client's address is the TCP peer's, unless the peer is one of the edge's trusted proxies: then it is the address the proxy forwards, for IP allow-lists and the audit log.",
		run: func(t *testing.T, d Door) {
			forwarded := []string{"X-Forwarded-For", OfficeAddr.String()}
			if d.Auth == AuthAdminToken {
				for _, trusted := range []bool{true, false} {
					opts := edge.Options{}
					want := netip.MustParseAddr("127.0.0.1")
					if trusted {
						opts.TrustedProxies, want = loopback, OfficeAddr
					}
					s := start(t, d, opts)
					_, before := s.env.changes.last()
					resp, body := s.withKey("", forwarded...).send(d.Call)
					wantSuccess(t, resp, body)
					got, after := s.env.changes.last()
					if after == before || got != want {
						t.Errorf("trusted %v: the change was recorded from %v (%d changes), want %v", trusted, got, after-before, want)
					}
				}
				return
			}
			s := start(t, d, edge.Options{TrustedProxies: loopback})
			resp, body := s.withKey(OfficeKey, forwarded...).send(d.Call)
			wantSuccess(t, resp, body)
			// A client that writes the office's address in X-Forwarded-For itself gets
			// its own address appended by the proxy: the address is that one, refused.
			c := &caller{s: s, hdr: http.Header{}}
			c.hdr.Set(wire.HeaderAPIKey, OfficeKey)
			c.hdr.Set("X-Forwarded-For", OfficeAddr.String()+", 203.0.113.9")
			resp, body = c.send(d.Call)
			wantRefusal(t, d, resp, body, d.ForbiddenCode)

			s = start(t, d, edge.Options{})
			// An untrusted peer's X-Forwarded-For is ignored: the key is refused for the
			// peer's address, before any session could be opened.
			c = &caller{s: s, hdr: http.Header{}}
			c.hdr.Set(wire.HeaderAPIKey, OfficeKey)
			c.hdr.Set(forwarded[0], forwarded[1])
			resp, body = c.send(d.Call)
			wantRefusal(t, d, resp, body, d.ForbiddenCode)
		},
	},
	{
		name:     "Suspended",
		contract: "A call of a suspended account is refused with the door's account_suspended code and status, from the next call, charged nothing, with no rate-limit decision and published as a refusal with its code; the doors of the account's holder still serve it; a reactivation lets the next call through.",
		applies:  func(d Door) bool { return d.Auth == AuthKey },
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{})
			c := s.withKey(Key)
			resp, body := c.send(d.Call)
			wantSuccess(t, resp, body)
			before := balance(t, s.env)
			if _, err := s.env.Accounts.SuspendAccount(t.Context(), "acme", "conformance"); err != nil {
				t.Fatal(err)
			}
			resp, body = c.send(d.Call)
			if d.SuspendedCode == "" {
				wantSuccess(t, resp, body)
			} else {
				if resp.StatusCode != d.SuspendedStatus {
					t.Fatalf("answered %s %s, want %d", resp.Status, body, d.SuspendedStatus)
				}
				got, err := d.Code(resp.StatusCode, resp.Header, body)
				if err != nil || got != d.SuspendedCode {
					t.Errorf("the refusal's code is %q (%v), want %q\n%s", got, err, d.SuspendedCode, body)
				}
				if resp.Header.Get(wire.HeaderErrorCode) == "" {
					t.Errorf("the refusal lacks X-Error-Code: %v", resp.Header)
				}
				if !strings.Contains(string(body), "suspended") || !strings.Contains(string(body), "contact the operator") {
					t.Errorf("the refusal does not tell the holder what to do: %s", body)
				}
				if v := resp.Header.Get(wire.HeaderRateLimitRemaining); v != "" {
					t.Errorf("the refusal carries a rate-limit decision (X-RateLimit-Remaining %s): it took a rate-limit event", v)
				}
				if after := balance(t, s.env); after != before {
					t.Errorf("the refusal was charged: %d credits before, %d after", before, after)
				}
				if codes := s.env.refusals.all(); !slices.Contains(codes, "account_suspended") {
					t.Errorf("the refusals published are %q; want one with account_suspended", codes)
				}
			}
			if _, err := s.env.Accounts.ReactivateAccount(t.Context(), "acme", ""); err != nil {
				t.Fatal(err)
			}
			resp, body = c.send(d.Call)
			wantSuccess(t, resp, body)
		},
	},
	{
		name:     "Closed",
		contract: "A key of a closed account is answered as a revoked key is: the same status, code and body.",
		applies:  func(d Door) bool { return d.Auth == AuthKey },
		run: func(t *testing.T, d Door) {
			s := start(t, d, edge.Options{})
			const revoked = "0b0f3a4c-2d5e-4f60-8a71-92b3c4d5e6f7"
			k, _, err := s.env.Accounts.CreateKey(t.Context(), "acme", accounts.NewKey{Name: "revoked", Value: revoked})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.env.Accounts.RevokeKey(t.Context(), k.ID); err != nil {
				t.Fatal(err)
			}
			// Both are sent as a first request, without what Open prepares: the door
			// refuses them before any session.
			wantResp, wantBody := s.as(wire.HeaderAPIKey, revoked).send(d.Call)
			wantRefusal(t, d, wantResp, wantBody, d.ForbiddenCode)
			if _, err := s.env.Accounts.CloseAccount(t.Context(), "acme", "conformance"); err != nil {
				t.Fatal(err)
			}
			resp, body := s.as(wire.HeaderAPIKey, Key).send(d.Call)
			wantRefusal(t, d, resp, body, d.ForbiddenCode)
			if resp.StatusCode != wantResp.StatusCode || string(body) != string(wantBody) {
				t.Errorf("a key of a closed account is answered\n%s %s\nand a revoked key\n%s %s", resp.Status, body, wantResp.Status, wantBody)
			}
		},
	},
}

// balance returns what remains of acme's balance.
func balance(t *testing.T, env *Env) int64 {
	t.Helper()
	info, err := env.Accounts.Account(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return info.Balance.Remaining
}

// Run runs every row that concerns d.
func Run(t *testing.T, d Door) {
	for _, r := range rows {
		if r.applies != nil && !r.applies(d) {
			continue
		}
		t.Run(r.name, func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("the contract: %s", r.contract)
				}
			}()
			r.run(t, d)
		})
	}
}

func wantBare403(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "text/html" ||
		!strings.Contains(string(body), "403 Forbidden") || strings.Contains(string(body), "{") {
		t.Errorf("answered %s %q %s, want the edge's bare 403", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	for name := range resp.Header {
		if strings.HasPrefix(name, "Access-Control-") || name == wire.HeaderErrorCode || strings.HasPrefix(name, "X-Credits-") {
			t.Errorf("the edge's bare 403 carries %s", name)
		}
	}
}

// origin is the Origin header of a request the rows send to see that a refusal carries
// no CORS header: a door that answers no cross-origin call is sent none, as a browser
// sends none to its own origin.
func origin(d Door) []string {
	if !d.CORS {
		return nil
	}
	return []string{"Origin", Origin}
}

// wantDoorsAnswer checks a refusal that is the door's own documented answer: its
// status, in the door's shape.
func wantDoorsAnswer(t *testing.T, d Door, resp *http.Response, body []byte, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("answered %s %s, want %d", resp.Status, body, status)
	}
	if _, err := d.Code(resp.StatusCode, resp.Header, body); err != nil {
		t.Errorf("the answer is not in the door's shape: %v\n%s", err, body)
	}
}

func wantSuccess(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		t.Fatalf("the call answered %s %s, want a success", resp.Status, body)
	}
	if code := resp.Header.Get(wire.HeaderErrorCode); code != "" {
		t.Errorf("a success carries X-Error-Code %q", code)
	}
}

func wantReceipt(t *testing.T, d Door, hdr http.Header, ietf bool) {
	t.Helper()
	for _, name := range []string{wire.HeaderCreditsCost, wire.HeaderCreditsRemaining, wire.HeaderCreditsGranted, wire.HeaderCreditsUsed,
		wire.HeaderCreditsLimit, wire.HeaderCreditsRenewal, wire.HeaderPlan, wire.HeaderRateLimit, wire.HeaderRateLimitRemaining} {
		if got := hdr.Get(name) != ""; got != d.Receipts {
			t.Errorf("%s written: %v, want %v", name, got, d.Receipts)
		}
	}
	for _, name := range []string{wire.HeaderRateLimitIETF, wire.HeaderRateLimitPolicy} {
		if got := hdr.Get(name) != ""; got != (ietf && d.Receipts) {
			t.Errorf("%s written: %v, want %v", name, got, ietf && d.Receipts)
		}
	}
}

func wantRefusal(t *testing.T, d Door, resp *http.Response, body []byte, code string) {
	t.Helper()
	if resp.StatusCode < 400 {
		t.Fatalf("answered %s %s, want a refusal", resp.Status, body)
	}
	got, err := d.Code(resp.StatusCode, resp.Header, body)
	if err != nil {
		t.Fatalf("the refusal is not in the door's shape: %v\n%s %s", err, resp.Status, body)
	}
	if got != code {
		t.Errorf("the refusal's code is %q, want %q\n%s", got, code, body)
	}
	if resp.Header.Get(wire.HeaderErrorCode) == "" {
		t.Errorf("the refusal lacks X-Error-Code: %v", resp.Header)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the refusal's Cache-Control is %q, want no-store", cc)
	}
}

// wantCORS checks the CORS headers of an answer to a request from origin, which the
// edge allows ("*": every origin).
func wantCORS(t *testing.T, d Door, resp *http.Response, origin string) {
	t.Helper()
	acao := resp.Header.Get("Access-Control-Allow-Origin")
	if !d.CORS {
		for name := range resp.Header {
			if strings.HasPrefix(name, "Access-Control-") {
				t.Errorf("a door without CORS writes %s: %q", name, resp.Header.Get(name))
			}
		}
		return
	}
	if acao != origin {
		t.Errorf("Access-Control-Allow-Origin %q, want %q", acao, origin)
	}
	exposed := strings.Split(resp.Header.Get("Access-Control-Expose-Headers"), ", ")
	for _, name := range []string{wire.HeaderErrorCode, wire.HeaderCreditsRemaining, wire.HeaderRateLimitRemaining} {
		if !slices.Contains(exposed, name) {
			t.Errorf("%s is not exposed to scripts: %v", name, exposed)
		}
	}
	if origin != "*" && !slices.Contains(resp.Header.Values("Vary"), "Origin") {
		t.Errorf("an answer for a list of origins lacks Vary: Origin")
	}
}
