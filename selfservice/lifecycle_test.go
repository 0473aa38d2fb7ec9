package selfservice_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/selfservice"
)

// TestSuspendedAccount: the holder of a suspended account reads its account, whose
// state says so, and its keys; creating or rotating a key is a 403 account_suspended
// that says what to do; revoking one works. A closed account is answered as a revoked
// key.
func TestSuspendedAccount(t *testing.T) {
	mgr := newManager(t, nil)
	ctx := t.Context()
	_, primary, value, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acme", Plan: "free"})
	if err != nil {
		t.Fatal(err)
	}
	sub, _, err := mgr.CreateKey(ctx, "acme", accounts.NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := selfservice.NewHandler(mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	send := func(method, path, body string) (int, string, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("X-Api-Key", value)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var env map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, rec.Body)
		}
		return rec.Code, rec.Header().Get("X-Error-Code"), env
	}
	if _, err := mgr.SuspendAccount(ctx, "acme", "unpaid invoice"); err != nil {
		t.Fatal(err)
	}
	status, _, env := send("GET", "/v1/account", "")
	acct, _ := env["data"].(map[string]any)["account"].(map[string]any)
	if status != 200 || acct["state"] != "suspended" || acct["state_changed_at"] == nil {
		t.Errorf("GET /v1/account: %d %v, want the account, suspended", status, env)
	}
	if status, _, _ := send("GET", "/v1/account/keys", ""); status != 200 {
		t.Errorf("GET /v1/account/keys: %d", status)
	}
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/v1/account/keys", `{"name":"new"}`},
		{"POST", "/v1/account/keys/" + primary.ID + "/rotate", ""},
		{"PATCH", "/v1/account/keys/" + sub.ID, `{"name":"renamed"}`},
	} {
		status, code, env := send(tt.method, tt.path, tt.body)
		if msg, _ := env["error"].(string); status != 403 || code != "account_suspended" || env["code"] != "account_suspended" || !strings.Contains(msg, "contact the operator") {
			t.Errorf("%s %s: %d %q %v, want 403 account_suspended saying to contact the operator", tt.method, tt.path, status, code, env)
		}
	}
	if status, _, env := send("POST", "/v1/account/keys/"+sub.ID+"/revoke", ""); status != 200 {
		t.Errorf("revoking a key: %d %v", status, env)
	}

	if _, err := mgr.CloseAccount(ctx, "acme", "done"); err != nil {
		t.Fatal(err)
	}
	if status, code, env := send("GET", "/v1/account", ""); status != 403 || code != "forbidden" || env["error"] != "the API key has been revoked; use another key of the account" {
		t.Errorf("GET /v1/account of a closed account: %d %q %v, want a revoked key's answer", status, code, env)
	}
}
