package rest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/rest"
)

// TestNewHandlerRefusesAnotherServicesManager checks that the accounts manager given to
// the REST handler must be its own service's: another's would answer the usage of
// accounts the handler does not serve.
func TestNewHandlerRefusesAnotherServicesManager(t *testing.T) {
	h1 := newHarness(t, config{noServer: true})
	h2 := newHarness(t, config{noServer: true})
	if _, err := rest.NewHandler(h1.svc, &rest.Options{Accounts: h2.mgr}); err == nil || !strings.Contains(err.Error(), "Options.Accounts") {
		t.Fatalf("NewHandler with another service's manager: %v, want an error naming Options.Accounts", err)
	}
	if _, err := rest.NewHandler(h1.svc, &rest.Options{Accounts: h1.mgr}); err != nil {
		t.Fatalf("NewHandler with its own manager: %v", err)
	}
}

// TestAnalyticsUsageWithoutAccounts checks the time series of GET /v1/analytics on a
// handler without an accounts manager: the caller is authenticated first (an unknown
// key is 401, as with a manager), and only then told that there is no usage (404).
func TestAnalyticsUsageWithoutAccounts(t *testing.T) {
	h := newHarness(t, config{noServer: true})
	acct := h.newAccount(t, "pro")
	bare, err := rest.NewHandler(h.svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, key string
		status    int
	}{
		{"unknown key", auth.NewKeyValue(), http.StatusUnauthorized},
		{"valid key", acct.Key, http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/v1/analytics?interval=day", nil)
			req.Header.Set("X-Api-Key", tt.key)
			w := httptest.NewRecorder()
			bare.ServeHTTP(w, req)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
		})
	}
}

// TestNewHandlerBrand checks the brand of the REST handler: its name titles the OpenAPI
// document unless OpenAPI.Title does, and an invalid brand is refused.
func TestNewHandlerBrand(t *testing.T) {
	h := newHarness(t, config{noServer: true})
	acme := brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME"}
	for _, tt := range []struct {
		opts rest.Options
		want string
	}{
		{rest.Options{}, "Tollgate API catalog"},
		{rest.Options{Brand: acme}, "Acme API catalog"},
		{rest.Options{Brand: brand.Brand{Name: "Acme API", Command: "acme", EnvPrefix: "ACME"}}, "Acme API catalog"},
		{rest.Options{Brand: acme, OpenAPI: rest.OpenAPIInfo{Title: "Acme's APIs"}}, "Acme's APIs"},
	} {
		rh, err := rest.NewHandler(h.svc, &tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		rh.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil))
		var doc struct {
			Info struct{ Title string } `json:"info"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || doc.Info.Title != tt.want {
			t.Errorf("%+v: the title is %q (%v), want %q", tt.opts, doc.Info.Title, err, tt.want)
		}
	}
	if _, err := rest.NewHandler(h.svc, &rest.Options{Brand: brand.Brand{Name: "Acme"}}); err == nil || !strings.Contains(err.Error(), "rest: Options.Brand: the Command") {
		t.Errorf("NewHandler with half a brand: %v", err)
	}
}
