package rest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/auth"
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
