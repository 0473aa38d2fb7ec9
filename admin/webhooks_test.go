package admin_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
)

// hookJSON is a webhook endpoint as the admin API answers it.
type hookJSON struct {
	ID             string   `json:"id"`
	Account        *string  `json:"account"`
	URL            string   `json:"url"`
	Events         []string `json:"events"`
	Secret         string   `json:"secret"`
	Disabled       bool     `json:"disabled"`
	DisabledReason *string  `json:"disabled_reason"`
	DisabledBy     *string  `json:"disabled_by"`
}

// newHookEnv returns an env whose admin API manages webhook endpoints kept in st, and
// acme's endpoint, created by its holder.
func newHookEnv(t *testing.T) (*env, *memory.WebhookStore, webhook.Endpoint) {
	t.Helper()
	clk := testenv.NewClock(t0)
	logs := &testenv.Logs{}
	mgr := newManager(t, clk.Now, logs.Logger())
	st := memory.NewWebhookStore()
	hooks := webhook.NewEndpoints(st, mgr.Service().Events(), &webhook.EndpointsOptions{Now: clk.Now})
	e := serve(t, clk, logs, mgr, &admin.Options{Webhooks: hooks})
	e.createAccount(`{"id":"acme","plan":"free"}`)
	ep, err := hooks.Create(t.Context(), event.Actor{ID: "key_holder"}, "acme", "https://acme.example.com/hooks", []string{webhook.KeyRotated})
	if err != nil {
		t.Fatal(err)
	}
	return e, st, ep
}

// TestOperatorWebhooks: the operator's endpoints are theirs only (an account's is 404
// there), shown with their secrets masked but when created or rotated, and their
// changes are in no account's audit log.
func TestOperatorWebhooks(t *testing.T) {
	e, st, acme := newHookEnv(t)
	r := e.admin(http.MethodPost, "/admin/v1/webhooks", `{"url":"https://ops.example.com/hooks","events":["account.suspended","account.closed"]}`)
	wantStatus(t, "create", r, http.StatusCreated)
	ops := data[hookJSON](t, r)
	if ops.Account != nil || !strings.HasPrefix(ops.Secret, "whsec_") || len(ops.Secret) < 40 || strings.Join(ops.Events, " ") != "account.closed account.suspended" {
		t.Fatalf("created %s", r.body)
	}
	r = e.admin(http.MethodGet, "/admin/v1/webhooks", "")
	wantStatus(t, "list", r, http.StatusOK)
	if strings.Contains(string(r.body), ops.Secret) || strings.Contains(string(r.body), acme.ID) || !strings.Contains(string(r.body), ops.Secret[:10]+"…") {
		t.Errorf("the operator's listing: %s", r.body)
	}
	wantError(t, "an account's endpoint among the operator's", e.admin(http.MethodGet, "/admin/v1/webhooks/"+acme.ID, ""), http.StatusNotFound, acme.ID)
	wantError(t, "an account's endpoint deleted as the operator's", e.admin(http.MethodDelete, "/admin/v1/webhooks/"+acme.ID, ""), http.StatusNotFound)
	r = e.admin(http.MethodPost, "/admin/v1/webhooks/"+ops.ID+"/rotate", "")
	wantStatus(t, "rotate", r, http.StatusOK)
	if s := data[hookJSON](t, r).Secret; s == ops.Secret || !strings.HasPrefix(s, "whsec_") {
		t.Errorf("rotated: %s", r.body)
	}
	wantStatus(t, "delete", e.admin(http.MethodDelete, "/admin/v1/webhooks/"+ops.ID, ""), http.StatusOK)
	if _, err := st.Endpoint(t.Context(), acme.ID); err != nil {
		t.Errorf("acme's endpoint after the operator's deletions: %v", err)
	}
	page, err := e.mgr.AuditLog(t.Context(), audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range page.Entries {
		if en.Target == ops.ID {
			t.Errorf("the operator's endpoint is in an account's audit log: %+v", en)
		}
	}
}

// TestAccountWebhooks: the operator lists an account's endpoints and disables one with a
// reason, which the holder sees with the endpoint and in the account's audit log.
func TestAccountWebhooks(t *testing.T) {
	e, _, acme := newHookEnv(t)
	r := e.admin(http.MethodGet, "/admin/v1/accounts/acme/webhooks", "")
	wantStatus(t, "list", r, http.StatusOK)
	list := data[struct{ Endpoints []hookJSON }](t, r)
	if len(list.Endpoints) != 1 || list.Endpoints[0].ID != acme.ID || list.Endpoints[0].Secret != webhook.MaskSecret(acme.Secret) {
		t.Fatalf("acme's endpoints: %s", r.body)
	}
	wantError(t, "an unknown account", e.admin(http.MethodGet, "/admin/v1/accounts/nobody/webhooks", ""), http.StatusNotFound, "nobody")

	e.clock.Advance(time.Minute)
	r = e.admin(http.MethodPatch, "/admin/v1/accounts/acme/webhooks/"+acme.ID, `{"disabled":true,"reason":"it answers every delivery with 500"}`)
	wantStatus(t, "disable", r, http.StatusOK)
	got := data[hookJSON](t, r)
	if !got.Disabled || got.DisabledReason == nil || *got.DisabledReason != "disabled by the operator: it answers every delivery with 500" {
		t.Errorf("disabled: %s", r.body)
	}
	wantError(t, "a reason too long", e.admin(http.MethodPatch, "/admin/v1/accounts/acme/webhooks/"+acme.ID,
		`{"disabled":true,"reason":"`+strings.Repeat("a", webhook.MaxReason)+`"}`), http.StatusBadRequest, "reason")
	wantError(t, "a change of the URL", e.admin(http.MethodPatch, "/admin/v1/accounts/acme/webhooks/"+acme.ID,
		`{"disabled":true,"url":"https://evil.example/"}`), http.StatusBadRequest, `"url"`)
	wantError(t, "another account", e.admin(http.MethodPatch, "/admin/v1/accounts/globex/webhooks/"+acme.ID, `{"disabled":true}`), http.StatusNotFound)

	r = e.admin(http.MethodGet, "/admin/v1/accounts/acme/audit", "")
	wantStatus(t, "audit", r, http.StatusOK)
	entries := data[struct {
		Entries []struct {
			Actor, Action string
			Target        *string
			Reason        *string
		}
	}](t, r).Entries
	if len(entries) == 0 || entries[0].Action != string(audit.EndpointDisable) || entries[0].Actor != audit.Operator ||
		entries[0].Target == nil || *entries[0].Target != acme.ID || entries[0].Reason == nil || !strings.Contains(*entries[0].Reason, "every delivery") {
		t.Errorf("the audit log: %s", r.body)
	}
	wantStatus(t, "enable", e.admin(http.MethodPatch, "/admin/v1/accounts/acme/webhooks/"+acme.ID, `{"disabled":false}`), http.StatusOK)
}

// TestAccountWebhookOperatorDisableSticks: the operator's disabling of an account's
// endpoint says so (disabled_by "operator"), and the holder's enabling of it is
// refused (store.ErrConflict, saying only the operator enables it) while the
// operator's enabling is taken; the operator deletes an account's endpoint, which is
// in the account's audit log, and an id of another account's endpoint, or of none, is
// a 404 that deletes nothing.
func TestAccountWebhookOperatorDisableSticks(t *testing.T) {
	e, st, acme := newHookEnv(t)
	hooks := webhook.NewEndpoints(st, nil, nil) // the holder's door, on the same store
	r := e.admin(http.MethodPatch, "/admin/v1/accounts/acme/webhooks/"+acme.ID, `{"disabled":true,"reason":"abuse"}`)
	wantStatus(t, "disable", r, http.StatusOK)
	if got := data[hookJSON](t, r); got.DisabledBy == nil || *got.DisabledBy != webhook.DisabledByOperator {
		t.Errorf("disabled by the operator: %s", r.body)
	}
	no := false
	_, err := hooks.Update(t.Context(), event.Actor{ID: "key_holder"}, "acme", acme.ID, webhook.EndpointChange{Disabled: &no})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "only the operator") {
		t.Errorf("the holder's enabling: %v, want a conflict saying only the operator enables it", err)
	}
	r = e.admin(http.MethodGet, "/admin/v1/accounts/acme/webhooks", "")
	if list := data[struct{ Endpoints []hookJSON }](t, r); len(list.Endpoints) != 1 || !list.Endpoints[0].Disabled {
		t.Errorf("after the holder's refused enabling: %s", r.body)
	}
	r = e.admin(http.MethodPatch, "/admin/v1/accounts/acme/webhooks/"+acme.ID, `{"disabled":false}`)
	wantStatus(t, "enable", r, http.StatusOK)
	if got := data[hookJSON](t, r); got.Disabled || got.DisabledBy != nil || got.DisabledReason != nil {
		t.Errorf("enabled by the operator: %s", r.body)
	}

	other, err := hooks.Create(t.Context(), event.Actor{ID: "key_globex"}, "globex", "https://globex.example.com/hooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "another account's endpoint", e.admin(http.MethodDelete, "/admin/v1/accounts/acme/webhooks/"+other.ID, ""), http.StatusNotFound, other.ID)
	wantError(t, "the operator's route for an account's endpoint", e.admin(http.MethodDelete, "/admin/v1/webhooks/"+acme.ID, ""), http.StatusNotFound)
	r = e.admin(http.MethodDelete, "/admin/v1/accounts/acme/webhooks/"+acme.ID, "")
	wantStatus(t, "delete", r, http.StatusOK)
	if got := data[struct {
		ID      string
		Deleted bool
	}](t, r); got.ID != acme.ID || !got.Deleted {
		t.Errorf("deleted: %s", r.body)
	}
	if _, err := st.Endpoint(t.Context(), acme.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("acme's endpoint after its deletion: %v", err)
	}
	if _, err := st.Endpoint(t.Context(), other.ID); err != nil {
		t.Errorf("globex's endpoint after the refused deletion: %v", err)
	}
	wantError(t, "deleted again", e.admin(http.MethodDelete, "/admin/v1/accounts/acme/webhooks/"+acme.ID, ""), http.StatusNotFound)
	r = e.admin(http.MethodGet, "/admin/v1/accounts/acme/audit", "")
	entries := data[struct {
		Entries []struct {
			Actor, Action string
			Target        *string
		}
	}](t, r).Entries
	if len(entries) == 0 || entries[0].Action != string(audit.EndpointDelete) || entries[0].Actor != audit.Operator ||
		entries[0].Target == nil || *entries[0].Target != acme.ID {
		t.Errorf("the audit log after the deletion: %s", r.body)
	}
}
