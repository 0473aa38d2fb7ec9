package admin_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/store/memory"
)

func TestNewHandler(t *testing.T) {
	ps, err := billing.NewPlans(plans...)
	if err != nil {
		t.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(&catalog.Registry{}, stores, ps, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	tests := []struct {
		name    string
		mgr     *accounts.Manager
		token   string
		wantErr bool
	}{
		{"nil manager", nil, adminToken, true},
		{"empty token", mgr, "", true},
		{"token one short", mgr, strings.Repeat("t", admin.MinTokenLength-1), true},
		{"token of the minimum length", mgr, strings.Repeat("t", admin.MinTokenLength), false},
		{"long token", mgr, adminToken, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := admin.NewHandler(tt.mgr, tt.token, nil)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("NewHandler: error %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && h == nil {
				t.Fatal("NewHandler returned a nil handler and no error")
			}
		})
	}
}

func TestToken(t *testing.T) {
	e := newEnv(t)
	e.createAccount(`{"id":"acme","plan":"pro"}`)
	tests := []struct {
		name   string
		auth   []string // Authorization header, if any
		status int
	}{
		{"missing", nil, http.StatusUnauthorized},
		{"empty", []string{"Authorization", ""}, http.StatusUnauthorized},
		{"scheme only", []string{"Authorization", "Bearer "}, http.StatusUnauthorized},
		{"wrong token", []string{"Authorization", "Bearer not-the-admin-token-at-all"}, http.StatusUnauthorized},
		{"prefix of the token", []string{"Authorization", "Bearer " + adminToken[:len(adminToken)-1]}, http.StatusUnauthorized},
		{"token with a suffix", []string{"Authorization", "Bearer " + adminToken + "x"}, http.StatusUnauthorized},
		{"wrong scheme", []string{"Authorization", "Basic " + adminToken}, http.StatusUnauthorized},
		{"no scheme", []string{"Authorization", adminToken}, http.StatusUnauthorized},
		{"in x-api-key", []string{"x-api-key", adminToken}, http.StatusUnauthorized},
		{"right", []string{"Authorization", "Bearer " + adminToken}, http.StatusOK},
		{"scheme in lowercase", []string{"Authorization", "bearer " + adminToken}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(http.MethodGet, "/admin/v1/accounts/acme", nil, tt.auth...)
			wantStatus(t, "GET account", r, tt.status)
			challenge := r.header.Get("WWW-Authenticate")
			if tt.status == http.StatusUnauthorized {
				if !strings.HasPrefix(challenge, "Bearer ") {
					t.Errorf("WWW-Authenticate %q, want a Bearer challenge", challenge)
				}
				if strings.Contains(string(r.body), adminToken) {
					t.Errorf("the 401 echoes the admin token: %s", r.body)
				}
			} else if challenge != "" {
				t.Errorf("WWW-Authenticate %q on a %d", challenge, r.status)
			}
		})
	}

	// The token is checked before anything is routed or changed.
	r := e.do(http.MethodPost, "/admin/v1/accounts", strings.NewReader(`{"id":"sneaky","plan":"pro"}`),
		"Authorization", "Bearer wrong-token-0123456789", "Content-Type", "application/json")
	wantStatus(t, "create with a wrong token", r, http.StatusUnauthorized)
	wantStatus(t, "the account it tried to create", e.admin(http.MethodGet, "/admin/v1/accounts/sneaky", ""), http.StatusNotFound)
	r = e.do(http.MethodGet, "/admin/v1/no-such-route", nil)
	wantStatus(t, "unknown route without a token", r, http.StatusUnauthorized)
}

func TestCreateAccount(t *testing.T) {
	e := newEnv(t)

	t.Run("created", func(t *testing.T) {
		r := e.admin(http.MethodPost, "/admin/v1/accounts", `{"id":"acme","plan":"pro"}`)
		wantStatus(t, "create", r, http.StatusCreated)
		// data.key has at least id, name, primary and its restrictions.
		raw := data[struct {
			Account map[string]any `json:"account"`
			Key     map[string]any `json:"key"`
		}](t, r)
		for _, f := range []string{"id", "plan"} {
			if _, ok := raw.Account[f]; !ok {
				t.Errorf("data.account has no %q: %s", f, r.body)
			}
		}
		for _, f := range []string{"id", "name", "primary", "apis", "channels", "allowed_ips", "expires_at"} {
			if _, ok := raw.Key[f]; !ok {
				t.Errorf("data.key has no %q: %s", f, r.body)
			}
		}
		for _, f := range []string{"value", "hash"} {
			if _, ok := raw.Key[f]; ok {
				t.Errorf("data.key has %q: %s", f, r.body)
			}
		}
		c := data[createdAccount](t, r)
		if c.Account.ID != "acme" || c.Account.Plan != "pro" || !c.Account.CreatedAt.Equal(t0) {
			t.Errorf("data.account = %+v, want acme on pro created at %s", c.Account, t0)
		}
		k := c.Key
		if k.ID == "" || k.Name != "primary" || !k.Primary || k.Revoked || k.Account != "acme" {
			t.Errorf("data.key = %+v, want the live primary key of acme", k)
		}
		if len(k.APIs) != 0 || len(k.Channels) != 0 || len(k.AllowedIPs) != 0 || k.ExpiresAt != nil {
			t.Errorf("data.key has restrictions: %+v", k)
		}
		if !uuidPattern.MatchString(c.Value) {
			t.Fatalf("data.value %q is not a UUID", c.Value)
		}
		if got := e.hash(c.Value); got != http.StatusOK {
			t.Errorf("GET /v1/hash with the new key: %d, want 200", got)
		}
	})

	t.Run("generated id", func(t *testing.T) {
		c := e.createAccount(`{"plan":"free"}`)
		if c.Account.ID == "" || c.Account.Plan != "free" || c.Key.Account != c.Account.ID {
			t.Fatalf("data = %+v, want an account with a generated id", c)
		}
		if got := e.account(c.Account.ID).Account.ID; got != c.Account.ID {
			t.Errorf("GET account %q returned %q", c.Account.ID, got)
		}
		if got := e.hash(c.Value); got != http.StatusOK {
			t.Errorf("GET /v1/hash with the new key: %d, want 200", got)
		}
		other := e.createAccount(`{"plan":"free"}`)
		if other.Account.ID == c.Account.ID || other.Value == c.Value || other.Key.ID == c.Key.ID {
			t.Errorf("two generated accounts share an id, key or value: %+v and %+v", c, other)
		}
	})

	t.Run("starting balance", func(t *testing.T) {
		tests := []struct {
			body            string
			remaining, used int64
			limit           int64
		}{
			{`{"id":"credits-7","plan":"free","credits":7}`, 7, 0, 50},
			{`{"id":"credits-0","plan":"pro","credits":0}`, 0, 0, 100000},
			{`{"id":"credits-default","plan":"free"}`, 50, 0, 50},
			{`{"id":"credits-above","plan":"free","credits":5000}`, 5000, 0, 50},
		}
		for _, tt := range tests {
			c := e.createAccount(tt.body)
			b := e.account(c.Account.ID).Balance
			want := balanceJSON{Remaining: tt.remaining, Used: tt.used, Limit: tt.limit,
				Renewal: t0.AddDate(0, 1, 0)}
			if !b.Renewal.Equal(want.Renewal) || b.Remaining != want.Remaining || b.Used != want.Used || b.Limit != want.Limit {
				t.Errorf("%s: balance %+v, want %+v", tt.body, b, want)
			}
		}
		// An account created with no credits is refused with 429 over REST.
		c := e.createAccount(`{"id":"empty","plan":"pro","credits":0}`)
		if got := e.hash(c.Value); got != http.StatusTooManyRequests {
			t.Errorf("a call on an empty balance: %d, want 429", got)
		}
	})

	t.Run("account restrictions confine the primary key", func(t *testing.T) {
		c := e.createAccount(`{"id":"hash-only","plan":"pro","apis":["hash"],"channels":["rest"]}`)
		if !slices.Equal(c.Account.APIs, []string{"hash"}) || !slices.Equal(c.Account.Channels, []string{"rest"}) {
			t.Errorf("data.account = %+v, want apis [hash] and channels [rest]", c.Account)
		}
		if got := e.hash(c.Value); got != http.StatusOK {
			t.Errorf("hash: %d, want 200", got)
		}
		r := e.rest(c.Value, "uuid-generator", nil)
		wantError(t, "uuid-generator with a hash-only key", r, http.StatusForbidden, "uuid-generator")
		r = e.rest(c.Value, "echo", map[string]string{"message": "hi"})
		wantStatus(t, "echo with a hash-only key", r, http.StatusForbidden)
	})

	t.Run("account expiry", func(t *testing.T) {
		c := e.createAccount(`{"id":"expiring","plan":"pro","expires_at":"2030-01-15T13:00:00Z"}`)
		if got := e.hash(c.Value); got != http.StatusOK {
			t.Fatalf("before expiry: %d, want 200", got)
		}
		e.clock.Set(t0.Add(time.Hour))
		defer e.clock.Set(t0)
		if got := e.hash(c.Value); got != http.StatusForbidden {
			t.Errorf("at expiry: %d, want 403", got)
		}
	})

	e.createAccount(`{"id":"taken","plan":"free"}`)
	errs := []struct {
		name        string
		body        string
		contentType string
		status      int
		fragments   []string
	}{
		{"unknown plan", `{"id":"x1","plan":"gold"}`, "application/json", 400, []string{`"gold"`, "free", "pro"}},
		{"no plan", `{"id":"x2"}`, "application/json", 400, []string{"plan"}},
		{"duplicate id", `{"id":"taken","plan":"pro"}`, "application/json", 409, []string{"taken"}},
		{"unknown field", `{"id":"x3","plan":"pro","credit":5}`, "application/json", 400, []string{"credit"}},
		{"negative credits", `{"id":"x4","plan":"pro","credits":-1}`, "application/json", 400, []string{"negative"}},
		{"fractional credits", `{"id":"x5","plan":"pro","credits":1.5}`, "application/json", 400, nil},
		{"bad id", `{"id":"no spaces","plan":"pro"}`, "application/json", 400, []string{"no spaces"}},
		{"id too long", `{"id":"` + strings.Repeat("a", 65) + `","plan":"pro"}`, "application/json", 400, nil},
		{"unknown channel", `{"id":"x6","plan":"pro","channels":["soap"]}`, "application/json", 400, []string{"soap"}},
		{"bad CIDR", `{"id":"x7","plan":"pro","allowed_ips":["10.0.0.0/33"]}`, "application/json", 400, []string{"10.0.0.0/33"}},
		{"bad api id", `{"id":"x8","plan":"pro","apis":["Hash!"]}`, "application/json", 400, []string{"Hash!"}},
		{"text content type", `{"id":"x9","plan":"pro"}`, "text/plain", 415, []string{"application/json"}},
		{"form content type", `id=x10&plan=pro`, "application/x-www-form-urlencoded", 415, nil},
		{"bad content type", `{"id":"x11","plan":"pro"}`, "application/json; charset", 415, nil},
		{"body over 64 KiB", `{"id":"x12","plan":"pro","apis":["` + strings.Repeat("a", 64<<10) + `"]}`, "application/json", 413, nil},
		{"empty body", ``, "application/json", 400, []string{"JSON object"}},
		{"not JSON", `{"id":`, "application/json", 400, nil},
		{"an array", `[]`, "application/json", 400, nil},
		{"two objects", `{"id":"x13","plan":"pro"}{"id":"x14","plan":"pro"}`, "application/json", 400, nil},
		{"trailing brace", `{"id":"x15","plan":"pro"}}`, "application/json", 400, nil},
		{"trailing garbage", `{"id":"x16","plan":"pro"} x`, "application/json", 400, nil},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(http.MethodPost, "/admin/v1/accounts", strings.NewReader(tt.body),
				"Authorization", "Bearer "+adminToken, "Content-Type", tt.contentType)
			wantError(t, "create", r, tt.status, tt.fragments...)
		})
	}
	// None of the refused requests created an account.
	for i := 1; i <= 16; i++ {
		id := "x" + strconv.Itoa(i)
		wantStatus(t, "refused account "+id, e.admin(http.MethodGet, "/admin/v1/accounts/"+id, ""), http.StatusNotFound)
	}
	// A body without a Content-Type is read as JSON.
	r := e.do(http.MethodPost, "/admin/v1/accounts", strings.NewReader(`{"id":"untyped","plan":"free"}`),
		"Authorization", "Bearer "+adminToken)
	wantStatus(t, "create without a Content-Type", r, http.StatusCreated)
}

func TestGetAccount(t *testing.T) {
	e := newEnv(t)
	c := e.createAccount(`{"id":"acme","plan":"pro"}`)
	ci := e.createKey("acme", `{"name":"ci","apis":["hash"],"allowed_ips":["10.0.0.0/8"]}`)
	rot := e.createKey("acme", `{"name":"rotated"}`)
	r := e.admin(http.MethodPost, "/admin/v1/keys/"+rot.Key.ID+"/rotate", "")
	wantStatus(t, "rotate", r, http.StatusOK)
	rotated := data[keyWithValue](t, r)
	values := []string{c.Value, ci.Value, rot.Value, rotated.Value}

	if got := e.hash(c.Value); got != http.StatusOK {
		t.Fatalf("hash: %d", got)
	}

	r = e.admin(http.MethodGet, "/admin/v1/accounts/acme", "")
	wantStatus(t, "get", r, http.StatusOK)
	for _, v := range values {
		for _, form := range []string{v, strings.ToUpper(v), strings.ReplaceAll(v, "-", "")} {
			if strings.Contains(string(r.body), form) {
				t.Errorf("the account's body holds the key value %s:\n%s", form, r.body)
			}
		}
	}
	raw := data[struct {
		Keys []map[string]any `json:"keys"`
	}](t, r)
	for _, k := range raw.Keys {
		for _, f := range []string{"value", "hash", "Hash"} {
			if _, ok := k[f]; ok {
				t.Errorf("key %v has a %q field", k["name"], f)
			}
		}
	}

	info := data[accountInfo](t, r)
	if info.Account.ID != "acme" || info.Account.Plan != "pro" {
		t.Errorf("account = %+v", info.Account)
	}
	want := balanceJSON{Remaining: 99999, Used: 1, Limit: 100000, Renewal: t0.AddDate(0, 1, 0)}
	if b := info.Balance; b.Remaining != want.Remaining || b.Used != want.Used || b.Limit != want.Limit || !b.Renewal.Equal(want.Renewal) {
		t.Errorf("balance = %+v, want %+v", b, want)
	}
	type keyView struct {
		id, name       string
		primary        bool
		apis, ips      []string
		rotated        bool
		revoked        bool
		accountMatches bool
	}
	var got []keyView
	for _, k := range info.Keys {
		got = append(got, keyView{k.ID, k.Name, k.Primary, k.APIs, k.AllowedIPs, k.RotatedAt != nil, k.Revoked, k.Account == "acme"})
	}
	wantKeys := []keyView{
		{c.Key.ID, "primary", true, []string{}, []string{}, false, false, true},
		{ci.Key.ID, "ci", false, []string{"hash"}, []string{"10.0.0.0/8"}, false, false, true},
		{rot.Key.ID, "rotated", false, []string{}, []string{}, true, false, true},
	}
	if len(got) != len(wantKeys) {
		t.Fatalf("keys = %+v, want %+v", got, wantKeys)
	}
	for i := range got {
		g, w := got[i], wantKeys[i]
		if g.id != w.id || g.name != w.name || g.primary != w.primary || !slices.Equal(g.apis, w.apis) ||
			!slices.Equal(g.ips, w.ips) || g.rotated != w.rotated || g.revoked != w.revoked || !g.accountMatches {
			t.Errorf("key %d = %+v, want %+v", i, g, w)
		}
	}

	for _, id := range []string{"nobody", "ACME", "acme-"} {
		wantError(t, "get "+id, e.admin(http.MethodGet, "/admin/v1/accounts/"+id, ""), http.StatusNotFound, id)
	}
}

func TestCreateKey(t *testing.T) {
	e := newEnv(t)
	acme := e.createAccount(`{"id":"acme","plan":"pro"}`)
	e.createAccount(`{"id":"narrow","plan":"pro","apis":["hash"]}`)

	// Each sub-key works over REST within its restrictions only. The test server's
	// clients come from loopback.
	tests := []struct {
		name  string
		body  string
		check func(t *testing.T, k keyJSON)
		calls []struct {
			api    string
			params map[string]string
			status int
		}
	}{
		{
			name: "unrestricted", body: `{"name":"plain"}`,
			calls: calls("hash", 200, "uuid-generator", 200, "echo", 200),
		},
		{
			name: "apis", body: `{"name":"ci","apis":["hash","echo"]}`,
			check: func(t *testing.T, k keyJSON) {
				if !slices.Equal(k.APIs, []string{"echo", "hash"}) {
					t.Errorf("apis = %v", k.APIs)
				}
			},
			calls: calls("hash", 200, "echo", 200, "uuid-generator", 403, "date-info", 403),
		},
		{
			name: "rest channel", body: `{"name":"rest-only","channels":["rest"]}`,
			check: func(t *testing.T, k keyJSON) {
				if !slices.Equal(k.Channels, []string{"rest"}) {
					t.Errorf("channels = %v", k.Channels)
				}
			},
			calls: calls("hash", 200, "uuid-generator", 200),
		},
		{
			name: "other channels", body: `{"name":"gql-mcp","channels":["graphql","mcp"]}`,
			calls: calls("hash", 403, "uuid-generator", 403),
		},
		{
			name: "loopback allowed", body: `{"name":"local","allowed_ips":["127.0.0.0/8","::1"]}`,
			check: func(t *testing.T, k keyJSON) {
				if !slices.Equal(k.AllowedIPs, []string{"127.0.0.0/8", "::1/128"}) {
					t.Errorf("allowed_ips = %v", k.AllowedIPs)
				}
			},
			calls: calls("hash", 200),
		},
		{
			name: "other network", body: `{"name":"office","allowed_ips":["10.0.0.0/8","203.0.113.7"]}`,
			calls: calls("hash", 403, "uuid-generator", 403),
		},
		{
			name: "expires later", body: `{"name":"temp","expires_at":"2030-01-15T13:00:00Z"}`,
			check: func(t *testing.T, k keyJSON) {
				if k.ExpiresAt == nil || !k.ExpiresAt.Equal(t0.Add(time.Hour)) {
					t.Errorf("expires_at = %v", k.ExpiresAt)
				}
			},
			calls: calls("hash", 200),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.admin(http.MethodPost, "/admin/v1/accounts/acme/keys", tt.body)
			wantStatus(t, "create key", r, http.StatusCreated)
			raw := data[map[string]any](t, r)
			if len(raw) != 2 || raw["key"] == nil || raw["value"] == nil {
				t.Errorf("data has fields other than key and value: %s", r.body)
			}
			k := data[keyWithValue](t, r)
			var name struct{ Name string }
			json.Unmarshal([]byte(tt.body), &name)
			if k.Key.ID == "" || k.Key.ID == acme.Key.ID || k.Key.Name != name.Name || k.Key.Primary || k.Key.Account != "acme" || k.Key.Revoked {
				t.Errorf("data.key = %+v", k.Key)
			}
			if !uuidPattern.MatchString(k.Value) || k.Value == acme.Value {
				t.Fatalf("data.value = %q", k.Value)
			}
			if tt.check != nil {
				tt.check(t, k.Key)
			}
			for _, c := range tt.calls {
				r := e.rest(k.Value, c.api, c.params)
				wantStatus(t, c.api, r, c.status)
			}
		})
	}

	t.Run("expiry takes effect", func(t *testing.T) {
		k := e.createKey("acme", `{"name":"short","expires_at":"2030-01-15T12:30:00Z"}`)
		if got := e.hash(k.Value); got != http.StatusOK {
			t.Fatalf("before expiry: %d", got)
		}
		e.clock.Set(t0.Add(30 * time.Minute))
		defer e.clock.Set(t0)
		r := e.rest(k.Value, "hash", map[string]string{"text": "x"})
		wantError(t, "at expiry", r, http.StatusForbidden, "expired")
		if got := e.hash(acme.Value); got != http.StatusOK {
			t.Errorf("the primary key after the sub-key expired: %d", got)
		}
	})

	t.Run("narrowing a restricted account", func(t *testing.T) {
		r := e.admin(http.MethodPost, "/admin/v1/accounts/narrow/keys", `{"name":"ok","apis":["hash"],"channels":["rest"]}`)
		wantStatus(t, "a narrower key", r, http.StatusCreated)
	})

	errs := []struct {
		name      string
		account   string
		body      string
		status    int
		fragments []string
	}{
		{"widens the APIs", "narrow", `{"name":"wide","apis":["hash","uuid-generator"]}`, 400, []string{"uuid-generator", "hash"}},
		{"widens to every API", "narrow", `{"name":"wide"}`, 400, []string{"hash"}},
		{"missing name", "acme", `{"apis":["hash"]}`, 400, []string{"name"}},
		{"blank name", "acme", `{"name":"   "}`, 400, []string{"name"}},
		{"name too long", "acme", `{"name":"` + strings.Repeat("n", 65) + `"}`, 400, []string{"name"}},
		{"unknown account", "nobody", `{"name":"ci"}`, 404, []string{"nobody"}},
		{"bad CIDR", "acme", `{"name":"ci","allowed_ips":["10.0.0.0/33"]}`, 400, []string{"10.0.0.0/33"}},
		{"not an address", "acme", `{"name":"ci","allowed_ips":["localhost"]}`, 400, []string{"localhost"}},
		{"unknown channel", "acme", `{"name":"ci","channels":["soap"]}`, 400, []string{"soap"}},
		{"bad api id", "acme", `{"name":"ci","apis":["Hash"]}`, 400, []string{"Hash"}},
		{"expired already", "acme", `{"name":"ci","expires_at":"2030-01-15T11:00:00Z"}`, 400, []string{"past"}},
		{"bad expiry", "acme", `{"name":"ci","expires_at":"tomorrow"}`, 400, nil},
		{"zero expiry", "acme", `{"name":"ci","expires_at":"0001-01-01T00:00:00Z"}`, 400, []string{"expires_at"}},
		{"unknown field", "acme", `{"name":"ci","value":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"}`, 400, []string{"value"}},
		{"empty body", "acme", ``, 400, nil},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := e.admin(http.MethodPost, "/admin/v1/accounts/"+tt.account+"/keys", tt.body)
			if tt.body == "" {
				r = e.do(http.MethodPost, "/admin/v1/accounts/"+tt.account+"/keys", nil,
					"Authorization", "Bearer "+adminToken, "Content-Type", "application/json")
			}
			wantError(t, "create key", r, tt.status, tt.fragments...)
		})
	}
	// The refused keys were not created: acme holds its primary key and the keys of the
	// table and the expiry test; narrow its primary key and the narrower key.
	if n := len(e.account("acme").Keys); n != 1+len(tests)+1 {
		t.Errorf("acme has %d keys, want %d", n, 1+len(tests)+1)
	}
	if n := len(e.account("narrow").Keys); n != 2 {
		t.Errorf("narrow has %d keys, want 2", n)
	}
}

// calls builds the REST calls of a key test from api, status pairs.
func calls(pairs ...any) []struct {
	api    string
	params map[string]string
	status int
} {
	params := map[string]map[string]string{
		"hash":           {"text": "x"},
		"uuid-generator": {"count": "2"},
		"echo":           {"message": "hi"},
		"date-info":      {"date": "2024-02-29"},
	}
	var out []struct {
		api    string
		params map[string]string
		status int
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		api := pairs[i].(string)
		out = append(out, struct {
			api    string
			params map[string]string
			status int
		}{api, params[api], pairs[i+1].(int)})
	}
	return out
}

func TestRotateKey(t *testing.T) {
	e := newEnv(t)
	acme := e.createAccount(`{"id":"acme","plan":"pro"}`)
	sub := e.createKey("acme", `{"name":"ci","apis":["hash"]}`)

	tests := []struct {
		name string
		id   string
		old  string
	}{
		{"primary key", acme.Key.ID, acme.Value},
		{"sub-key", sub.Key.ID, sub.Value},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.hash(tt.old); got != http.StatusOK {
				t.Fatalf("before rotation: %d", got)
			}
			r := e.admin(http.MethodPost, "/admin/v1/keys/"+tt.id+"/rotate", "")
			wantStatus(t, "rotate", r, http.StatusOK)
			k := data[keyWithValue](t, r)
			if k.Key.ID != tt.id || k.Key.Revoked || k.Key.RotatedAt == nil || !k.Key.RotatedAt.Equal(t0) {
				t.Errorf("data.key = %+v, want the same key, rotated at %s", k.Key, t0)
			}
			if !uuidPattern.MatchString(k.Value) || k.Value == tt.old {
				t.Fatalf("data.value = %q (old %q)", k.Value, tt.old)
			}
			r = e.rest(tt.old, "hash", map[string]string{"text": "x"})
			wantError(t, "the old value on the very next call", r, http.StatusUnauthorized)
			if got := e.hash(k.Value); got != http.StatusOK {
				t.Errorf("the new value: %d, want 200", got)
			}
			// The key keeps its restrictions.
			if tt.id == sub.Key.ID {
				wantStatus(t, "the rotated sub-key outside its APIs", e.rest(k.Value, "uuid-generator", nil), http.StatusForbidden)
			}
		})
	}

	t.Run("rotating twice", func(t *testing.T) {
		first := data[keyWithValue](t, e.admin(http.MethodPost, "/admin/v1/keys/"+sub.Key.ID+"/rotate", ""))
		second := data[keyWithValue](t, e.admin(http.MethodPost, "/admin/v1/keys/"+sub.Key.ID+"/rotate", ""))
		if first.Value == second.Value {
			t.Fatal("two rotations gave the same value")
		}
		if got := e.hash(first.Value); got != http.StatusUnauthorized {
			t.Errorf("the value of the first rotation after the second: %d, want 401", got)
		}
		if got := e.hash(second.Value); got != http.StatusOK {
			t.Errorf("the value of the second rotation: %d, want 200", got)
		}
	})

	t.Run("revoked key", func(t *testing.T) {
		k := e.createKey("acme", `{"name":"gone"}`)
		wantStatus(t, "revoke", e.admin(http.MethodPost, "/admin/v1/keys/"+k.Key.ID+"/revoke", ""), http.StatusOK)
		r := e.admin(http.MethodPost, "/admin/v1/keys/"+k.Key.ID+"/rotate", "")
		wantError(t, "rotate a revoked key", r, http.StatusConflict)
		if got := e.hash(k.Value); got != http.StatusForbidden {
			t.Errorf("the revoked key after a refused rotation: %d, want 403", got)
		}
	})

	t.Run("unknown key", func(t *testing.T) {
		r := e.admin(http.MethodPost, "/admin/v1/keys/key_nope/rotate", "")
		wantError(t, "rotate", r, http.StatusNotFound, "key_nope")
	})
}

func TestRevokeKey(t *testing.T) {
	e := newEnv(t)
	acme := e.createAccount(`{"id":"acme","plan":"pro"}`)
	sub := e.createKey("acme", `{"name":"ci"}`)
	if got := e.hash(sub.Value); got != http.StatusOK {
		t.Fatalf("before revocation: %d", got)
	}

	for i, want := range []int{http.StatusOK, http.StatusOK} { // revoking twice is fine
		r := e.admin(http.MethodPost, "/admin/v1/keys/"+sub.Key.ID+"/revoke", "")
		wantStatus(t, "revoke", r, want)
		raw := data[map[string]any](t, r)
		if _, ok := raw["value"]; ok || len(raw) != 1 {
			t.Errorf("revoke %d: data = %s, want only the key", i, r.body)
		}
		k := data[struct {
			Key keyJSON `json:"key"`
		}](t, r).Key
		if k.ID != sub.Key.ID || !k.Revoked || k.RevokedAt == nil || !k.RevokedAt.Equal(t0) {
			t.Errorf("revoke %d: data.key = %+v, want revoked at %s", i, k, t0)
		}
		r = e.rest(sub.Value, "hash", map[string]string{"text": "x"})
		wantError(t, "the revoked key on the very next call", r, http.StatusForbidden, "revoked")
	}
	if got := e.hash(acme.Value); got != http.StatusOK {
		t.Errorf("the account's other key: %d, want 200", got)
	}
	for _, k := range e.account("acme").Keys {
		if k.Revoked != (k.ID == sub.Key.ID) {
			t.Errorf("key %s: revoked %v", k.Name, k.Revoked)
		}
	}

	t.Run("primary key", func(t *testing.T) {
		wantStatus(t, "revoke", e.admin(http.MethodPost, "/admin/v1/keys/"+acme.Key.ID+"/revoke", ""), http.StatusOK)
		if got := e.hash(acme.Value); got != http.StatusForbidden {
			t.Errorf("the revoked primary key: %d, want 403", got)
		}
	})

	t.Run("unknown key", func(t *testing.T) {
		wantError(t, "revoke", e.admin(http.MethodPost, "/admin/v1/keys/key_nope/revoke", ""), http.StatusNotFound, "key_nope")
	})
}

func TestCredits(t *testing.T) {
	e := newEnv(t)
	e.createAccount(`{"id":"acme","plan":"pro","credits":100}`)

	// The steps run in order against one account; remaining is the balance after each
	// (read back with GET account), and also in data.balance of a 200.
	steps := []struct {
		name      string
		account   string
		body      string
		hdr       []string
		status    int
		remaining int64
	}{
		{"grant", "acme", `{"amount":10,"reason":"goodwill"}`, nil, 200, 110},
		{"take", "acme", `{"amount":-5,"reason":"correction"}`, nil, 200, 105},
		{"below zero", "acme", `{"amount":-106,"reason":"too much"}`, nil, 409, 105},
		{"down to zero", "acme", `{"amount":-105,"reason":"all of it"}`, nil, 200, 0},
		{"grant again", "acme", `{"amount":100,"reason":"top-up"}`, nil, 200, 100},
		{"amount 0", "acme", `{"amount":0,"reason":"nothing"}`, nil, 400, 100},
		{"amount missing", "acme", `{"reason":"nothing"}`, nil, 400, 100},
		{"amount null", "acme", `{"amount":null,"reason":"nothing"}`, nil, 400, 100},
		{"amount fractional", "acme", `{"amount":1.5,"reason":"half"}`, nil, 400, 100},
		{"amount a string", "acme", `{"amount":"10","reason":"text"}`, nil, 400, 100},
		{"reason missing", "acme", `{"amount":10}`, nil, 400, 100},
		{"reason blank", "acme", `{"amount":10,"reason":"  "}`, nil, 400, 100},
		{"reason too long", "acme", `{"amount":10,"reason":"` + strings.Repeat("r", 501) + `"}`, nil, 400, 100},
		{"unknown field", "acme", `{"amount":10,"reason":"x","note":"y"}`, nil, 400, 100},
		{"idempotent grant", "acme", `{"amount":20,"reason":"retry me"}`, []string{"Idempotency-Key", "grant-1"}, 200, 120},
		{"the same grant again", "acme", `{"amount":20,"reason":"retry me"}`, []string{"Idempotency-Key", "grant-1"}, 200, 120},
		{"another idempotency key", "acme", `{"amount":20,"reason":"retry me"}`, []string{"Idempotency-Key", "grant-2"}, 200, 140},
		{"idempotency key too long", "acme", `{"amount":20,"reason":"x"}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, 140},
		{"without idempotency keys each applies", "acme", `{"amount":1,"reason":"one"}`, nil, 200, 141},
		{"and again", "acme", `{"amount":1,"reason":"one"}`, nil, 200, 142},
		{"unknown account", "nobody", `{"amount":10,"reason":"x"}`, nil, 404, 142},
	}
	for _, s := range steps {
		r := e.admin(http.MethodPost, "/admin/v1/accounts/"+s.account+"/credits", s.body, s.hdr...)
		wantStatus(t, s.name, r, s.status)
		if s.status == http.StatusOK {
			raw := data[map[string]any](t, r)
			if len(raw) != 1 {
				t.Errorf("%s: data = %s, want only the balance", s.name, r.body)
			}
			b := data[struct {
				Balance balanceJSON `json:"balance"`
			}](t, r).Balance
			if b.Remaining != s.remaining || b.Limit != 100000 || !b.Renewal.Equal(t0.AddDate(0, 1, 0)) {
				t.Errorf("%s: data.balance = %+v, want %d remaining", s.name, b, s.remaining)
			}
		}
		if got := e.account("acme").Balance.Remaining; got != s.remaining {
			t.Errorf("%s: the balance read back is %d, want %d", s.name, got, s.remaining)
		}
	}

	// The balance that grants leave is spendable over REST.
	c := e.createAccount(`{"id":"broke","plan":"pro","credits":0}`)
	if got := e.hash(c.Value); got != http.StatusTooManyRequests {
		t.Fatalf("a call on an empty balance: %d, want 429", got)
	}
	wantStatus(t, "grant", e.admin(http.MethodPost, "/admin/v1/accounts/broke/credits", `{"amount":1,"reason":"one call"}`), http.StatusOK)
	if got := e.hash(c.Value); got != http.StatusOK {
		t.Fatalf("a call after a grant of 1: %d, want 200", got)
	}
	if got := e.hash(c.Value); got != http.StatusTooManyRequests {
		t.Fatalf("a second call: %d, want 429", got)
	}
	// An idempotency key belongs to its account: the same key on another account applies.
	r := e.admin(http.MethodPost, "/admin/v1/accounts/broke/credits", `{"amount":20,"reason":"retry me"}`, "Idempotency-Key", "grant-1")
	wantStatus(t, "the same idempotency key on another account", r, http.StatusOK)
	if got := e.account("broke").Balance.Remaining; got != 20 {
		t.Errorf("broke: %d remaining, want 20", got)
	}
}

// TestCreditGrants checks grants with an expiry: the balance shows its two parts and
// the next lapse; a grant that lapses is gone from then on, one that never lapses
// carries over the renewal, which resets the allowance part only.
func TestCreditGrants(t *testing.T) {
	e := newEnv(t)
	e.createAccount(`{"id":"acme","plan":"pro","credits":100}`)
	lapse := t0.Add(48 * time.Hour)
	grant := func(body string, status int) balanceJSON {
		t.Helper()
		r := e.admin(http.MethodPost, "/admin/v1/accounts/acme/credits", body)
		wantStatus(t, body, r, status)
		if status != http.StatusOK {
			return balanceJSON{}
		}
		return data[struct {
			Balance balanceJSON `json:"balance"`
		}](t, r).Balance
	}
	b := grant(`{"amount":50,"reason":"prepaid","expires_at":"`+lapse.Format(time.RFC3339)+`"}`, http.StatusOK)
	if b.Remaining != 150 || b.Granted != 50 || b.AllowanceRemaining != 100 || b.NextLapse == nil ||
		!b.NextLapse.At.Equal(lapse) || b.NextLapse.Credits != 50 {
		t.Errorf("after a grant of 50 lapsing at %s: %+v", lapse, b)
	}
	b = grant(`{"amount":30,"reason":"bought"}`, http.StatusOK)
	if b.Remaining != 180 || b.Granted != 80 || b.NextLapse == nil || b.NextLapse.Credits != 50 {
		t.Errorf("after a grant of 30 that never lapses: %+v", b)
	}
	for _, body := range []string{
		`{"amount":5,"reason":"past","expires_at":"` + t0.Add(-time.Second).Format(time.RFC3339) + `"}`,
		`{"amount":5,"reason":"now","expires_at":"` + t0.Format(time.RFC3339) + `"}`,
		`{"amount":5,"reason":"far","expires_at":"` + t0.AddDate(11, 0, 0).Format(time.RFC3339) + `"}`,
		`{"amount":-5,"reason":"taken","expires_at":"` + lapse.Format(time.RFC3339) + `"}`,
		`{"amount":5,"reason":"not a time","expires_at":"tomorrow"}`,
	} {
		grant(body, http.StatusBadRequest)
	}
	e.clock.Set(lapse)
	if b := e.account("acme").Balance; b.Remaining != 130 || b.Granted != 30 || b.NextLapse != nil {
		t.Errorf("at the lapse: %+v, want 130 remaining, 30 of them granted, nothing lapsing", b)
	}
	e.clock.Set(t0.AddDate(0, 1, 0))
	if b := e.account("acme").Balance; b.Remaining != 100030 || b.Granted != 30 || b.AllowanceRemaining != 100000 || b.Used != 0 {
		t.Errorf("after the renewal: %+v, want the allowance of 100000 and the 30 granted", b)
	}
}

func TestRoutes(t *testing.T) {
	e := newEnv(t)
	acme := e.createAccount(`{"id":"acme","plan":"pro"}`)
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/admin/v1/nope", 404, ""},
		{http.MethodGet, "/admin/", 404, ""},
		{http.MethodGet, "/admin/v2/accounts/acme", 404, ""},
		{http.MethodPost, "/admin/v1/accounts/acme/nope", 404, ""},
		{http.MethodPost, "/admin/v1/keys/" + acme.Key.ID, 404, ""},
		{http.MethodGet, "/admin/v1/accounts/", 404, ""},
		{http.MethodPut, "/admin/v1/accounts", 405, "GET, HEAD, POST"},
		{http.MethodPut, "/admin/v1/accounts/acme", 405, "DELETE, GET, HEAD, PATCH"},
		{http.MethodGet, "/admin/v1/accounts/acme/suspend", 405, "POST"},
		{http.MethodDelete, "/admin/v1/accounts/acme/close", 405, "POST"},
		{http.MethodDelete, "/admin/v1/accounts/acme/keys", 405, "GET, HEAD, POST"},
		{http.MethodGet, "/admin/v1/keys/" + acme.Key.ID + "/rotate", 405, "POST"},
		{http.MethodDelete, "/admin/v1/keys/" + acme.Key.ID + "/revoke", 405, "POST"},
		{http.MethodGet, "/admin/v1/accounts/acme/credits", 405, "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := e.do(tt.method, tt.path, nil, "Authorization", "Bearer "+adminToken)
			wantStatus(t, tt.method+" "+tt.path, r, tt.status)
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
		})
	}
	// The refused methods changed nothing.
	if got := e.hash(acme.Value); got != http.StatusOK {
		t.Errorf("the primary key after the refused requests: %d", got)
	}
	// HEAD is GET without a body.
	r := e.do(http.MethodHead, "/admin/v1/accounts/acme", nil, "Authorization", "Bearer "+adminToken)
	if r.status != http.StatusOK || len(r.body) != 0 {
		t.Errorf("HEAD account: %d with %d bytes", r.status, len(r.body))
	}
}

// TestMessagesAreCleanText: a message that echoes the request (an unknown route with a
// NUL, invalid UTF-8 and a line break in its path) is clean text.
func TestMessagesAreCleanText(t *testing.T) {
	e := newEnv(t)
	r := e.do(http.MethodGet, "/admin/v1/x%00y%ffz%0Aw", nil, "Authorization", "Bearer "+adminToken)
	wantError(t, "an unknown route", r, http.StatusNotFound, "no admin route", "x\uFFFDy\uFFFDz w")
}

// TestPlans: GET /admin/v1/plans lists the plans an account may be on, sorted by name,
// with their limits; it takes GET only.
func TestPlans(t *testing.T) {
	e := newEnv(t)
	r := e.admin(http.MethodGet, "/admin/v1/plans", "")
	wantStatus(t, "GET /admin/v1/plans", r, http.StatusOK)
	var data struct {
		Plans []billing.Plan `json:"plans"`
	}
	if err := json.Unmarshal(r.env.Data, &data); err != nil {
		t.Fatal(err)
	}
	want := e.mgr.Service().Plans().All()
	if len(data.Plans) == 0 || !reflect.DeepEqual(data.Plans, want) {
		t.Errorf("plans %+v, want %+v", data.Plans, want)
	}
	for i := 1; i < len(data.Plans); i++ {
		if data.Plans[i-1].Name >= data.Plans[i].Name {
			t.Errorf("plans not sorted by name: %q before %q", data.Plans[i-1].Name, data.Plans[i].Name)
		}
	}
	wantStatus(t, "POST /admin/v1/plans", e.admin(http.MethodPost, "/admin/v1/plans", "{}"), http.StatusMethodNotAllowed)
	wantStatus(t, "GET /admin/v1/plans without the token", e.do(http.MethodGet, "/admin/v1/plans", nil), http.StatusUnauthorized)
}

// TestCreateAccountAgain: creating an account whose id exists with the same plan and
// restrictions answers 200 with created false and no key value (values are not
// stored); another plan is a 409 that says what differs.
func TestCreateAccountAgain(t *testing.T) {
	e := newEnv(t)
	first := e.admin(http.MethodPost, "/admin/v1/accounts", `{"id":"cust1","plan":"pro"}`)
	wantStatus(t, "the first creation", first, http.StatusCreated)
	again := e.admin(http.MethodPost, "/admin/v1/accounts", `{"id":"cust1","plan":"pro"}`)
	wantStatus(t, "the same creation again", again, http.StatusOK)
	var data map[string]json.RawMessage
	if err := json.Unmarshal(again.env.Data, &data); err != nil {
		t.Fatal(err)
	}
	if string(data["created"]) != "false" || data["value"] != nil || data["account"] == nil {
		t.Errorf("the same creation again: %s, want the account, created false and no value", again.env.Data)
	}
	other := e.admin(http.MethodPost, "/admin/v1/accounts", `{"id":"cust1","plan":"free"}`)
	wantStatus(t, "another plan", other, http.StatusConflict)
	if !strings.Contains(*other.env.Error, `its plan is "pro", not "free"`) {
		t.Errorf("another plan: %q, want it to say what differs", *other.env.Error)
	}
}
