package doors_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestWebhooks: Options.Webhooks reaches the account holders' API, the admin API and
// the dashboard; without it, their webhook routes answer 404 saying that the service
// delivers none, the OpenAPI document describes them all the same, and the dashboard
// has no Webhooks page nor a link to it.
func TestWebhooks(t *testing.T) {
	for _, with := range []bool{true, false} {
		svc := newService(t, true)
		opts := &doors.Options{AdminToken: token}
		if with {
			opts.Webhooks = webhook.NewEndpoints(memory.NewWebhookStore(), svc.Events(), nil)
		}
		mux := http.NewServeMux()
		m, err := doors.Mount(mux, svc, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		if _, _, _, err := m.Accounts.CreateAccount(t.Context(), accounts.Spec{ID: "acme", Plan: "pro", KeyValue: key}); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		for _, r := range []struct{ path, name, value string }{
			{"/v1/account/webhooks", wire.HeaderAPIKey, key},
			{"/admin/v1/webhooks", "Authorization", "Bearer " + token},
		} {
			res, body := get(t, srv, r.path, r.name, r.value)
			switch {
			case with && (res.StatusCode != http.StatusOK || !strings.Contains(body, `"endpoints":[]`)):
				t.Errorf("GET %s with webhooks: %d %s", r.path, res.StatusCode, body)
			case !with && (res.StatusCode != http.StatusNotFound || !strings.Contains(body, "this service delivers no webhooks")):
				t.Errorf("GET %s without webhooks: %d %s", r.path, res.StatusCode, body)
			}
		}
		if _, body := get(t, srv, "/v1/openapi.json"); !strings.Contains(body, `"/v1/account/webhooks/{endpoint_id}/test"`) {
			t.Errorf("the OpenAPI document does not describe the webhook routes")
		}

		// The dashboard, signed in with the primary key.
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.PostForm(srv.URL+"/dashboard/sign-in", url.Values{"api_key": {key}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("signing in to the dashboard: %d", res.StatusCode)
		}
		for _, path := range []string{"/dashboard/", "/dashboard/webhooks"} {
			res, err := c.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			body := string(b)
			switch linked := strings.Contains(body, `href="webhooks"`); {
			case path == "/dashboard/webhooks" && with && (res.StatusCode != http.StatusOK || !strings.Contains(body, "Add an endpoint")):
				t.Errorf("GET %s with webhooks: %d\n%s", path, res.StatusCode, body)
			case path == "/dashboard/webhooks" && !with && res.StatusCode != http.StatusNotFound:
				t.Errorf("GET %s without webhooks: %d, want 404", path, res.StatusCode)
			case path == "/dashboard/" && linked != with:
				t.Errorf("GET %s: the navigation links to the Webhooks page: %v, want %v", path, linked, with)
			}
		}
	}
}
