package doors_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestWebhooks: Options.Webhooks reaches the account holders' API and the admin API;
// without it, their webhook routes answer 404 saying that the service delivers none,
// and the OpenAPI document describes them all the same.
func TestWebhooks(t *testing.T) {
	for _, with := range []bool{true, false} {
		svc := newService(t, false)
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
	}
}
