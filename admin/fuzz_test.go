package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
)

// fuzzMethods are the methods FuzzRequest picks from.
var fuzzMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead, http.MethodPatch}

// FuzzRequest sends arbitrary admin requests (a method, a path under /admin/ and a
// JSON body) with the admin token. The handler never panics and never answers 5xx,
// and every answer is the envelope, JSON, with a clean message; a redirect of the
// ServeMux for a path that is not clean is the only other answer.
//
//	go test -run='^$' -fuzz=FuzzRequest -fuzztime=30s ./admin/
func FuzzRequest(f *testing.F) {
	for _, s := range []struct {
		method     uint8
		path, body string
	}{
		{1, "v1/accounts", `{"id":"fuzz","plan":"pro"}`},
		{1, "v1/accounts", `{"plan":"pro","credits":-1,"keys":[{"name":"k","restrictions":{"apis":["hash"],"channels":["rest"],"allowed_ips":["10.0.0.0/8"]}}]}`},
		{0, "v1/accounts/acme", ``},
		{4, "v1/accounts/acme", ``},
		{1, "v1/accounts/acme/keys", `{"name":"ci","expires_at":"2031-01-01T00:00:00Z","restrictions":{"allowed_ips":["::1/128","bad"]}}`},
		{1, "v1/accounts/acme/credits", `{"amount":100,"reason":"gift"}`},
		{1, "v1/accounts/acme/credits", `{"amount":-9223372036854775808,"reason":"x"}`},
		{1, "v1/accounts/acme/credits", `{"amount":1e400,"reason":"x"}`},
		{1, "v1/keys/00000000-0000-4000-8000-000000000000/rotate", ``},
		{1, "v1/keys/x/revoke", `{}`},
		{2, "v1/accounts/acme", `{}`},
		{0, "v1/%00%ff", ``},
		{0, "v1//accounts/../accounts/acme", ``},
		{1, "v1/accounts", "{\"id\":\"\x00\xff\",\"plan\":\"pro\"}"},
		{1, "v1/accounts", `[`},
	} {
		f.Add(s.method, s.path, []byte(s.body))
	}
	h := newAdminHandler(f)
	f.Fuzz(func(t *testing.T, method uint8, path string, body []byte) {
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		req, err := http.NewRequestWithContext(t.Context(), m, "http://admin.test/admin/"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code >= 500:
			t.Fatalf("%s /admin/%s %q: %d %s", m, path, body, rec.Code, rec.Body)
		case rec.Code == http.StatusMovedPermanently || rec.Code == http.StatusTemporaryRedirect || rec.Code == http.StatusPermanentRedirect:
			return // the ServeMux's redirect to the clean path
		case m == http.MethodHead:
			return
		}
		var env struct {
			Status string
			Error  *string
			Data   json.RawMessage
		}
		if rec.Header().Get("Content-Type") != "application/json" || json.Unmarshal(rec.Body.Bytes(), &env) != nil {
			t.Fatalf("%s /admin/%s %q: not the JSON envelope: %d %q", m, path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && (env.Error == nil || *env.Error == "" || cleantext.Message(*env.Error) != *env.Error) {
			t.Fatalf("%s /admin/%s %q: the error is empty or not clean text: %s", m, path, body, rec.Body)
		}
	})
}

// newAdminHandler returns the admin handler of a service on memory stores, with the
// account acme.
func newAdminHandler(tb testing.TB) http.Handler {
	tb.Helper()
	mgr := newManager(tb, nil, slog.New(slog.DiscardHandler))
	if _, _, _, err := mgr.CreateAccount(context.Background(), accounts.Spec{ID: "acme", Plan: "pro"}); err != nil {
		tb.Fatal(err)
	}
	h, err := admin.NewHandler(mgr, adminToken, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}
