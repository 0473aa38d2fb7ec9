package selfservice_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// TestRouting checks the answers the handler gives before the service is asked: the
// edge's bare 403 without a well-formed key, 405 with Allow, 404 for other paths, 400
// for a body that changes nothing, 415 for a body that is not JSON.
func TestRouting(t *testing.T) {
	mgr := newManager(t, nil)
	_, key, value, err := mgr.CreateAccount(context.Background(), accounts.Spec{Plan: "free"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := selfservice.NewHandler(mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := selfservice.NewHandler(nil, nil); err == nil {
		t.Error("NewHandler(nil) succeeded")
	}
	for _, tc := range []struct {
		name, method, path, key, contentType, body string
		status                                     int
		allow, contains                            string
	}{
		{name: "no key", method: "GET", path: "/v1/account", status: 403, contains: "<html>"},
		{name: "malformed key", method: "GET", path: "/v1/account", key: "undefined", status: 403, contains: "<html>"},
		{name: "unknown key", method: "GET", path: "/v1/account", key: "00000000-0000-4000-8000-000000000000", status: 401},
		{name: "the account", method: "GET", path: "/v1/account", key: value, status: 200, contains: key.ID},
		{name: "wrong method", method: "PUT", path: "/v1/account/keys", key: value, status: 405, allow: "GET, HEAD, POST"},
		{name: "unknown route", method: "GET", path: "/v1/account/nothing", key: value, status: 404},
		{name: "empty change", method: "PATCH", path: "/v1/account/keys/" + key.ID, key: value, body: "{}", status: 400, contains: "changes nothing"},
		{name: "not JSON", method: "POST", path: "/v1/account/keys", key: value, contentType: "text/plain", body: "name=x", status: 415},
		{name: "two objects", method: "POST", path: "/v1/account/keys", key: value, body: `{"name":"a"}{"name":"b"}`, status: 400},
		{name: "bad audit limit", method: "GET", path: "/v1/account/audit?limit=0", key: value, status: 400, contains: "limit"},
		{name: "no audit log", method: "GET", path: "/v1/account/audit", key: value, status: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.key != "" {
				req.Header.Set("X-Api-Key", tc.key)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Errorf("status %d (%s), want %d", rec.Code, rec.Body, tc.status)
			}
			if tc.allow != "" && rec.Header().Get("Allow") != tc.allow {
				t.Errorf("Allow %q, want %q", rec.Header().Get("Allow"), tc.allow)
			}
			if !strings.Contains(rec.Body.String(), tc.contains) {
				t.Errorf("body %s does not hold %q", rec.Body, tc.contains)
			}
			if strings.Contains(rec.Body.String(), value) {
				t.Errorf("the key's value is in the answer")
			}
		})
	}
}

// TestBalanceParts checks that the account's balance shows its two parts: what is left
// of the period's allowance and the grants, with the next lapse.
func TestBalanceParts(t *testing.T) {
	now := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	mgr := newManager(t, &tollgate.Options{Now: func() time.Time { return now }})
	acct, _, value, err := mgr.CreateAccount(t.Context(), accounts.Spec{Plan: "free"})
	if err != nil {
		t.Fatal(err)
	}
	lapse := now.Add(72 * time.Hour)
	if _, err := mgr.AdjustCredits(t.Context(), acct.ID, 7, "prepaid", &accounts.CreditOptions{ExpiresAt: lapse}); err != nil {
		t.Fatal(err)
	}
	h, err := selfservice.NewHandler(mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/account", nil)
	req.Header.Set("X-Api-Key", value)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body struct {
		Data struct {
			Balance struct {
				Remaining          int64 `json:"remaining"`
				Granted            int64 `json:"granted"`
				AllowanceRemaining int64 `json:"allowance_remaining"`
				NextLapse          struct {
					At      time.Time `json:"at"`
					Credits int64     `json:"credits"`
				} `json:"next_lapse"`
			} `json:"balance"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	b := body.Data.Balance
	if b.Remaining != 17 || b.Granted != 7 || b.AllowanceRemaining != 10 || !b.NextLapse.At.Equal(lapse) || b.NextLapse.Credits != 7 {
		t.Errorf("balance %+v (%s), want 17 remaining, 7 granted lapsing at %s, 10 of the allowance", b, rec.Body, lapse)
	}
}

// newManager returns the manager of a service on memory stores with one plan, "free",
// of 10 credits a month.
func newManager(t *testing.T, opts *tollgate.Options) *accounts.Manager {
	t.Helper()
	plans, err := billing.NewPlans(billing.Plan{Name: "free", Credits: 10})
	if err != nil {
		t.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(&catalog.Registry{}, stores, plans, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	return mgr
}
