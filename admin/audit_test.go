package admin_test

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/doortest"
)

// auditEntryJSON is one entry of data.entries of the audit route.
type auditEntryJSON struct {
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Action  string          `json:"action"`
	Account string          `json:"account"`
	Target  *string         `json:"target"`
	Before  json.RawMessage `json:"before"`
	After   json.RawMessage `json:"after"`
	Credits *int64          `json:"credits"`
	Address *string         `json:"address"`
	Reason  *string         `json:"reason"`
}

// auditPage is the data of the audit route.
type auditPage struct {
	Entries []auditEntryJSON `json:"entries"`
	Next    *string          `json:"next"`
}

// auditLog reads every page of an account's audit log through the admin API, with the
// given query parameters, and returns the entries and the response bodies.
func (e *env) auditLog(account string, params url.Values) ([]auditEntryJSON, []string) {
	e.t.Helper()
	var entries []auditEntryJSON
	var bodies []string
	for range 100 {
		r := e.admin(http.MethodGet, "/admin/v1/accounts/"+account+"/audit?"+params.Encode(), "")
		wantStatus(e.t, "audit log", r, http.StatusOK)
		bodies = append(bodies, string(r.body))
		p := data[auditPage](e.t, r)
		entries = append(entries, p.Entries...)
		if p.Next == nil {
			return entries, bodies
		}
		params.Set("cursor", *p.Next)
	}
	e.t.Fatal("the audit log's next never ended")
	return nil, nil
}

func TestAuditLog(t *testing.T) {
	e := newEnv(t)
	acme := e.createAccount(`{"id":"acme","plan":"pro","apis":["hash","echo"]}`)
	e.clock.Advance(time.Minute)
	sub := e.createKey("acme", `{"name":"ci","apis":["hash"]}`)
	e.clock.Advance(time.Minute)
	r := e.admin(http.MethodPost, "/admin/v1/keys/"+sub.Key.ID+"/rotate", "")
	wantStatus(t, "rotate", r, http.StatusOK)
	rotated := data[keyWithValue](t, r)
	e.clock.Advance(time.Minute)
	wantStatus(t, "revoke", e.admin(http.MethodPost, "/admin/v1/keys/"+sub.Key.ID+"/revoke", ""), http.StatusOK)
	e.clock.Advance(time.Minute)
	wantStatus(t, "credits", e.admin(http.MethodPost, "/admin/v1/accounts/acme/credits", `{"amount":-7,"reason":"refund of ticket 4"}`), http.StatusOK)
	other := e.createAccount(`{"id":"other","plan":"free"}`)
	// Refused changes are not recorded.
	wantStatus(t, "a wider key", e.admin(http.MethodPost, "/admin/v1/accounts/acme/keys", `{"name":"wide","apis":["uuid-generator"]}`), http.StatusBadRequest)
	wantStatus(t, "rotate an unknown key", e.admin(http.MethodPost, "/admin/v1/keys/key_nope/rotate", ""), http.StatusNotFound)

	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	localhost := str("127.0.0.1")
	want := []auditEntryJSON{
		{At: at(4), Actor: "operator", Action: "credits.adjust", Account: "acme", Credits: num(-7), Address: localhost, Reason: str("refund of ticket 4")},
		{At: at(3), Actor: "operator", Action: "key.revoke", Account: "acme", Target: &sub.Key.ID, Address: localhost},
		{At: at(2), Actor: "operator", Action: "key.rotate", Account: "acme", Target: &sub.Key.ID, Address: localhost},
		{At: at(1), Actor: "operator", Action: "key.create", Account: "acme", Target: &sub.Key.ID, Address: localhost,
			After: json.RawMessage(`{"apis":["hash"]}`)},
		{At: at(0), Actor: "operator", Action: "account.create", Account: "acme", Target: &acme.Key.ID, Address: localhost,
			After: json.RawMessage(`{"apis":["echo","hash"]}`), Credits: num(100000)},
	}
	normalize := func(es []auditEntryJSON) {
		for i := range es {
			for _, raw := range []*json.RawMessage{&es[i].Before, &es[i].After} {
				if string(*raw) == "null" {
					*raw = nil
				}
			}
		}
	}

	var bodies []string
	for _, limit := range []string{"", "1", "2", "5", "1000"} {
		params := url.Values{}
		if limit != "" {
			params.Set("limit", limit)
		}
		got, b := e.auditLog("acme", params)
		bodies = append(bodies, b...)
		normalize(got)
		if !reflect.DeepEqual(got, want) {
			gotJSON, _ := json.MarshalIndent(got, "", " ")
			wantJSON, _ := json.MarshalIndent(want, "", " ")
			t.Fatalf("audit log of acme, limit %q:\n got %s\nwant %s", limit, gotJSON, wantJSON)
		}
	}

	t.Run("account isolation", func(t *testing.T) {
		got, b := e.auditLog("other", url.Values{})
		bodies = append(bodies, b...)
		if len(got) != 1 || got[0].Action != "account.create" || got[0].Account != "other" || *got[0].Target != other.Key.ID {
			t.Errorf("audit log of other: %+v, want its creation only", got)
		}
		if got, _ := e.auditLog("nobody", url.Values{}); len(got) != 0 {
			t.Errorf("audit log of an account with no entries: %+v", got)
		}
	})

	t.Run("time range", func(t *testing.T) {
		got, _ := e.auditLog("acme", url.Values{"from": {at(1).Format(time.RFC3339)}, "to": {at(3).Format(time.RFC3339)}})
		if len(got) != 2 || got[0].Action != "key.rotate" || got[1].Action != "key.create" {
			t.Errorf("audit log from minute 1 to 3: %+v, want the rotation and the creation", got)
		}
	})

	t.Run("bad parameters", func(t *testing.T) {
		for _, q := range []string{
			"limit=0", "limit=1001", "limit=-1", "limit=ten", "limit=1&limit=2",
			"cursor=nonsense", "cursor=" + strings.Repeat("a", 65),
			"from=yesterday", "to=2030-13-01T00:00:00Z",
			"from=2030-01-15T12:00:00Z&to=2030-01-15T12:00:00Z",
			"page=2",
		} {
			r := e.admin(http.MethodGet, "/admin/v1/accounts/acme/audit?"+q, "")
			wantStatus(t, q, r, http.StatusBadRequest)
		}
		r := e.admin(http.MethodGet, "/admin/v1/accounts/a%00b/audit", "")
		wantStatus(t, "a NUL in the account id", r, http.StatusBadRequest)
		r = e.admin(http.MethodPost, "/admin/v1/accounts/acme/audit", "")
		wantStatus(t, "POST", r, http.StatusMethodNotAllowed)
		r = e.do(http.MethodGet, "/admin/v1/accounts/acme/audit", nil)
		wantStatus(t, "without the admin token", r, http.StatusUnauthorized)
	})

	t.Run("no key value", func(t *testing.T) {
		logs := e.logs.String()
		for name, v := range map[string]string{"acme's primary key": acme.Value, "the sub-key": sub.Value,
			"the rotated sub-key": rotated.Value, "other's primary key": other.Value} {
			for _, b := range bodies {
				if strings.Contains(b, v) {
					t.Errorf("the value of %s is in the audit log: %s", name, b)
				}
			}
			if strings.Contains(logs, v) {
				t.Errorf("the value of %s is in the logs", name)
			}
		}
	})
}

// TestAuditAddressBehindProxy checks the address an admin change is recorded from:
// behind a trusted proxy, the client that its X-Forwarded-For names; from a peer that is
// not a trusted proxy, the peer, whatever X-Forwarded-For it sends.
func TestAuditAddressBehindProxy(t *testing.T) {
	// The test server's clients connect from loopback.
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	elsewhere := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tt := range []struct {
		name    string
		trusted []netip.Prefix
		xff     []string
		want    string
	}{
		{"no proxy configured, header ignored", nil, []string{"198.51.100.7"}, "127.0.0.1"},
		{"no proxy configured, no header", nil, nil, "127.0.0.1"},
		{"trusted proxy", loopback, []string{"198.51.100.7"}, "198.51.100.7"},
		{"trusted proxy, IPv6 client", loopback, []string{"2001:db8::7"}, "2001:db8::7"},
		{"trusted proxy, client chain", loopback, []string{"203.0.113.9, 198.51.100.7"}, "198.51.100.7"},
		{"trusted proxy, two trusted hops", loopback, []string{"198.51.100.7, 127.0.0.2"}, "198.51.100.7"},
		{"trusted proxy, garbage hop stops the walk", loopback, []string{"198.51.100.7, not-an-ip"}, "127.0.0.1"},
		{"trusted proxy, no header", loopback, nil, "127.0.0.1"},
		{"untrusted peer, spoofed header ignored", elsewhere, []string{"198.51.100.7"}, "127.0.0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvWith(t, &admin.Options{Edge: doortest.NewEdge(t, edge.Options{TrustedProxies: tt.trusted})})
			var hdr []string
			for _, v := range tt.xff {
				hdr = append(hdr, "X-Forwarded-For", v)
			}
			r := e.admin(http.MethodPost, "/admin/v1/accounts", `{"id":"acme","plan":"pro"}`, hdr...)
			wantStatus(t, "create an account", r, http.StatusCreated)
			got, _ := e.auditLog("acme", url.Values{})
			if len(got) != 1 || got[0].Address == nil || *got[0].Address != tt.want {
				t.Fatalf("audit log: %+v, want one entry from %s", got, tt.want)
			}
		})
	}
}
