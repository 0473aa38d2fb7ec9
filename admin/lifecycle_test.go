package admin_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/doors"
)

// accountState is the state of data.account.
type accountState struct {
	ID             string     `json:"id"`
	State          string     `json:"state"`
	StateChangedAt *time.Time `json:"state_changed_at"`
	DeletableAt    *time.Time `json:"deletable_at"`
}

// accountsPage is the data of GET /admin/v1/accounts.
type accountsPage struct {
	Accounts []accountState `json:"accounts"`
	Next     *string        `json:"next"`
}

// TestListAccounts lists accounts a page at a time with each filter, and refuses every
// parameter out of bounds with a 400 that names it.
func TestListAccounts(t *testing.T) {
	e := newEnv(t)
	for i, id := range []string{"acme", "beta", "team-a", "team-b", "team-c"} {
		plan := "free"
		if i%2 == 1 {
			plan = "pro"
		}
		e.createAccount(fmt.Sprintf(`{"id":%q,"plan":%q}`, id, plan))
		e.clock.Advance(time.Hour)
	}
	wantStatus(t, "suspend", e.admin(http.MethodPost, "/admin/v1/accounts/team-a/suspend", `{"reason":"review"}`), http.StatusOK)
	list := func(query string) []string {
		t.Helper()
		var ids []string
		cursor := ""
		for range 20 {
			q, err := url.ParseQuery(query)
			if err != nil {
				t.Fatal(err)
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			r := e.admin(http.MethodGet, "/admin/v1/accounts?"+q.Encode(), "")
			wantStatus(t, "list "+query, r, http.StatusOK)
			page := data[accountsPage](t, r)
			for _, a := range page.Accounts {
				ids = append(ids, a.ID+":"+a.State)
			}
			if page.Next == nil {
				return ids
			}
			cursor = *page.Next
		}
		t.Fatalf("list %s: no end after 20 pages", query)
		return nil
	}
	from, before := t0.Add(time.Hour).Format(time.RFC3339), t0.Add(3*time.Hour).Format(time.RFC3339)
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"acme:active", "beta:active", "team-a:suspended", "team-b:active", "team-c:active"}},
		{"limit=2", []string{"acme:active", "beta:active", "team-a:suspended", "team-b:active", "team-c:active"}},
		{"plan=pro", []string{"beta:active", "team-b:active"}},
		{"state=suspended", []string{"team-a:suspended"}},
		{"state=active&id_prefix=team-&limit=1", []string{"team-b:active", "team-c:active"}},
		{"created_from=" + from + "&created_before=" + before, []string{"beta:active", "team-a:suspended"}},
		{"state=closed", nil},
	} {
		if got := list(tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("list %q = %q, want %q", tt.query, got, tt.want)
		}
	}
	for _, tt := range []struct{ query, names string }{
		{"limit=0", "limit"},
		{"limit=201", "limit"},
		{"limit=x", "limit"},
		{"state=gone", "state"},
		{"created_from=yesterday", "created_from"},
		{"created_before=2030-01-15", "created_before"},
		{"created_from=" + before + "&created_before=" + from, "created_from"},
		{"id_prefix=" + strings.Repeat("a", 65), "id_prefix"},
		{"plan=" + strings.Repeat("p", 65), "plan"},
		{"cursor=" + strings.Repeat("c", 65), "cursor"},
		{"sort=id", `"sort"`},
		{"state=active&state=closed", `"state"`},
		{"id_prefix=%00", "id_prefix"},
	} {
		r := e.admin(http.MethodGet, "/admin/v1/accounts?"+tt.query, "")
		wantError(t, "list "+tt.query, r, http.StatusBadRequest, tt.names)
	}
}

// TestStateRoutes: suspend and close need a reason, reactivate does not; a change to
// the state an account is in answers it unchanged; a closed account is final (409);
// the body is checked as every route's.
func TestStateRoutes(t *testing.T) {
	e := newEnv(t)
	e.createAccount(`{"id":"acme","plan":"free"}`)
	post := func(path, body string) response {
		t.Helper()
		return e.admin(http.MethodPost, "/admin/v1/accounts/acme/"+path, body)
	}
	wantError(t, "suspend without a body", post("suspend", ""), http.StatusBadRequest, "reason is required")
	wantError(t, "suspend with a blank reason", post("suspend", `{"reason":"  "}`), http.StatusBadRequest, "reason is required")
	wantError(t, "close without a reason", post("close", `{}`), http.StatusBadRequest, "reason is required")
	wantError(t, "an unknown field", post("suspend", `{"reason":"x","until":"never"}`), http.StatusBadRequest, `unknown field "until"`)
	wantError(t, "a reason of the wrong type", post("suspend", `{"reason":5}`), http.StatusBadRequest, "reason must be a string")
	wantError(t, "a reason with a control character", post("suspend", `{"reason":"a\u0007b"}`), http.StatusBadRequest, "reason")
	wantError(t, "an unknown account", e.admin(http.MethodPost, "/admin/v1/accounts/nobody/suspend", `{"reason":"x"}`), http.StatusNotFound, "nobody")

	e.clock.Advance(time.Minute)
	r := post("suspend", `{"reason":"unpaid invoice"}`)
	wantStatus(t, "suspend", r, http.StatusOK)
	acct := data[struct{ Account accountState }](t, r).Account
	if acct.State != "suspended" || acct.StateChangedAt == nil || !acct.StateChangedAt.Equal(t0.Add(time.Minute)) || acct.DeletableAt != nil {
		t.Errorf("the suspended account: %+v", acct)
	}
	e.clock.Advance(time.Minute)
	r = post("suspend", `{"reason":"again"}`)
	wantStatus(t, "suspend again", r, http.StatusOK)
	if again := data[struct{ Account accountState }](t, r).Account; !again.StateChangedAt.Equal(*acct.StateChangedAt) {
		t.Errorf("suspending again changed the account: %+v", again)
	}
	r = e.admin(http.MethodGet, "/admin/v1/accounts/acme", "")
	if got := data[struct{ Account accountState }](t, r).Account; got.State != "suspended" {
		t.Errorf("GET shows %+v", got)
	}
	r = post("reactivate", "")
	wantStatus(t, "reactivate without a body", r, http.StatusOK)
	if got := data[struct{ Account accountState }](t, r).Account; got.State != "active" {
		t.Errorf("reactivated: %+v", got)
	}
	wantStatus(t, "reactivate with a reason", post("reactivate", `{"reason":"paid"}`), http.StatusOK)

	r = post("close", `{"reason":"the customer left"}`)
	wantStatus(t, "close", r, http.StatusOK)
	closed := data[struct{ Account accountState }](t, r).Account
	if closed.State != "closed" || closed.DeletableAt == nil || !closed.DeletableAt.Equal(t0.Add(2*time.Minute+90*24*time.Hour)) {
		t.Errorf("the closed account: %+v, want deletable 90 days after its closure", closed)
	}
	wantStatus(t, "close again", post("close", `{"reason":"again"}`), http.StatusOK)
	wantError(t, "suspend a closed account", post("suspend", `{"reason":"x"}`), http.StatusConflict, "closed", "cannot be suspended")
	wantError(t, "reactivate a closed account", post("reactivate", ""), http.StatusConflict, "closed", "cannot be reactivated")
	wantError(t, "a key for a closed account", e.admin(http.MethodPost, "/admin/v1/accounts/acme/keys", `{"name":"late"}`), http.StatusConflict, "closed")

	// The audit log tells each change once, with its reason, for the operator.
	r = e.admin(http.MethodGet, "/admin/v1/accounts/acme/audit?limit=5", "")
	var actions []string
	for _, en := range data[struct {
		Entries []struct{ Action, Reason, Actor string }
	}](t, r).Entries {
		actions = append(actions, en.Action+" "+en.Reason)
	}
	want := []string{"key.revoke ", "account.close the customer left", "account.reactivate ", "account.suspend unpaid invoice", "account.create "}
	if !slices.Equal(actions, want) {
		t.Errorf("audit log %q, want %q", actions, want)
	}
}

// walk is the doors as doors.Mount wires them (REST, GraphQL, MCP and the admin API)
// on an env's service.
type walk struct {
	*env
	srv *httptest.Server
}

func newWalk(t *testing.T) *walk {
	t.Helper()
	e := newEnv(t)
	mux := http.NewServeMux()
	m, err := doors.Mount(mux, e.svc, &doors.Options{Doors: doors.REST | doors.GraphQL | doors.MCP | doors.Admin,
		Accounts: e.mgr, AdminToken: adminToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.srv = srv
	return &walk{env: e, srv: srv}
}

// post sends a POST with a JSON body and key, and returns the status, X-Error-Code and
// body.
func (w *walk) post(path, key, body string, hdr ...string) (int, string, []byte) {
	w.t.Helper()
	req, err := http.NewRequestWithContext(w.t.Context(), http.MethodPost, w.srv.URL+path, strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := w.srv.Client().Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	return res.StatusCode, res.Header.Get("X-Error-Code"), b
}

// graphql sends a query naming hash with key, and returns the status and the first
// error's code ("" for none).
func (w *walk) graphql(key string) (int, string) {
	w.t.Helper()
	status, _, body := w.post("/v1/graphql", key, `{"query":"{ hash(text: \"a\") { hash } }"}`, "Accept", "application/graphql-response+json")
	var resp struct {
		Errors []struct {
			Extensions struct{ Code string } `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		w.t.Fatalf("graphql: %v\n%s", err, body)
	}
	if len(resp.Errors) == 0 {
		return status, ""
	}
	return status, resp.Errors[0].Extensions.Code
}

// mcpSession opens an MCP session with key and returns its id.
func (w *walk) mcpSession(key string) string {
	w.t.Helper()
	req, err := http.NewRequestWithContext(w.t.Context(), http.MethodPost, w.srv.URL+"/v1/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"walk","version":"1"}}}`))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("x-api-key", key)
	res, err := w.srv.Client().Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	res.Body.Close()
	sid := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || sid == "" {
		w.t.Fatalf("initialize: %s", res.Status)
	}
	if status, _, body := w.post("/v1/mcp", key, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, w.mcpHeaders(sid)...); status != http.StatusAccepted {
		w.t.Fatalf("initialized: %d %s", status, body)
	}
	return sid
}

func (w *walk) mcpHeaders(sid string) []string {
	return []string{"Accept", "application/json, text/event-stream", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"}
}

// mcpCall calls the hash tool in session sid with key, and returns the status and the
// JSON-RPC error's data.code ("" for a result).
func (w *walk) mcpCall(key, sid string) (int, string) {
	w.t.Helper()
	status, _, body := w.post("/v1/mcp", key, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`, w.mcpHeaders(sid)...)
	var resp struct {
		Result *struct{ IsError bool } `json:"result"`
		Error  *struct {
			Data struct{ Code string } `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		w.t.Fatalf("tools/call: %v\n%s", err, body)
	}
	switch {
	case resp.Error != nil:
		return status, resp.Error.Data.Code
	case resp.Result == nil || resp.Result.IsError:
		w.t.Fatalf("tools/call: %d %s", status, body)
	}
	return status, ""
}

// TestLifecycleWalk walks an account through its life over the doors: calls succeed;
// suspended, REST, GraphQL and MCP refuse them with account_suspended, charged
// nothing; reactivated, they succeed again; closed, its key is answered as a revoked
// key is; its deletion is refused until the closure's retention has passed, then
// done.
func TestLifecycleWalk(t *testing.T) {
	w := newWalk(t)
	acme := w.createAccount(`{"id":"acme","plan":"pro"}`)
	key := acme.Value
	sid := w.mcpSession(key)
	calls := func(what string, wantREST int, wantCode, wantGQL, wantMCP string) {
		t.Helper()
		r := w.rest(key, "hash", map[string]string{"text": "x"})
		if r.status != wantREST || r.header.Get("X-Error-Code") != wantCode {
			t.Errorf("%s: REST answered %d %q %s, want %d %q", what, r.status, r.header.Get("X-Error-Code"), r.body, wantREST, wantCode)
		}
		if wantCode != "" && (r.env.Error == nil || !strings.Contains(*r.env.Error, "contact the operator")) {
			t.Errorf("%s: REST's message %s does not say what to do", what, r.body)
		}
		if status, code := w.graphql(key); code != wantGQL || wantGQL != "" && status != http.StatusForbidden {
			t.Errorf("%s: GraphQL answered %d %q, want %q", what, status, code, wantGQL)
		}
		if _, code := w.mcpCall(key, sid); code != wantMCP {
			t.Errorf("%s: MCP answered %q, want %q", what, code, wantMCP)
		}
	}
	calls("active", http.StatusOK, "", "", "")
	used := w.account("acme").Balance.Used

	wantStatus(t, "suspend", w.admin(http.MethodPost, "/admin/v1/accounts/acme/suspend", `{"reason":"unpaid invoice"}`), http.StatusOK)
	calls("suspended", http.StatusForbidden, "account_suspended", "ACCOUNT_SUSPENDED", "account_suspended")
	if got := w.account("acme").Balance.Used; got != used {
		t.Errorf("the suspended account's refused calls were charged: %d credits used, then %d", used, got)
	}

	wantStatus(t, "reactivate", w.admin(http.MethodPost, "/admin/v1/accounts/acme/reactivate", ""), http.StatusOK)
	calls("reactivated", http.StatusOK, "", "", "")

	// A revoked sub-key, for the answer a key of a closed account must give.
	sub := w.createKey("acme", `{"name":"old"}`)
	wantStatus(t, "revoke", w.admin(http.MethodPost, "/admin/v1/keys/"+sub.Key.ID+"/revoke", ""), http.StatusOK)
	revoked := w.rest(sub.Value, "hash", map[string]string{"text": "x"})

	w.clock.Advance(time.Hour)
	wantStatus(t, "close", w.admin(http.MethodPost, "/admin/v1/accounts/acme/close", `{"reason":"the customer left"}`), http.StatusOK)
	closed := w.rest(key, "hash", map[string]string{"text": "x"})
	if closed.status != revoked.status || closed.header.Get("X-Error-Code") != revoked.header.Get("X-Error-Code") || string(closed.body) != string(revoked.body) {
		t.Errorf("a key of the closed account answered %d %s, a revoked key %d %s", closed.status, closed.body, revoked.status, revoked.body)
	}
	if status, code := w.graphql(key); status != http.StatusForbidden || code != "FORBIDDEN" {
		t.Errorf("GraphQL with a key of the closed account: %d %q, want 403 FORBIDDEN", status, code)
	}
	for _, k := range w.account("acme").Keys {
		if !k.Revoked {
			t.Errorf("key %s of the closed account is not revoked", k.ID)
		}
	}

	w.clock.Advance(90*24*time.Hour - time.Minute)
	deletable := t0.Add(time.Hour + 90*24*time.Hour).Format(time.RFC3339)
	wantError(t, "delete within the retention", w.admin(http.MethodDelete, "/admin/v1/accounts/acme", ""), http.StatusConflict,
		"kept for 90 days", "deleted from "+deletable)
	wantStatus(t, "the account after the refusal", w.admin(http.MethodGet, "/admin/v1/accounts/acme", ""), http.StatusOK)
	w.clock.Advance(time.Minute)
	r := w.admin(http.MethodDelete, "/admin/v1/accounts/acme", "")
	wantStatus(t, "delete after the retention", r, http.StatusOK)
	if got := data[struct {
		ID      string
		Deleted bool
	}](t, r); got.ID != "acme" || !got.Deleted {
		t.Errorf("delete answered %s", r.body)
	}
	wantError(t, "the deleted account", w.admin(http.MethodGet, "/admin/v1/accounts/acme", ""), http.StatusNotFound)
	wantError(t, "deleting it again", w.admin(http.MethodDelete, "/admin/v1/accounts/acme", ""), http.StatusNotFound)
	if got := w.hash(key); got != http.StatusUnauthorized {
		t.Errorf("a key of the deleted account: %d, want 401", got)
	}
}

// TestDeleteActiveAccount: an account that is not closed is not deleted.
func TestDeleteActiveAccount(t *testing.T) {
	e := newEnv(t)
	e.createAccount(`{"id":"acme","plan":"free"}`)
	wantError(t, "delete an active account", e.admin(http.MethodDelete, "/admin/v1/accounts/acme", ""), http.StatusConflict, "only a closed account can be deleted", "close it first")
	wantError(t, "delete a missing account", e.admin(http.MethodDelete, "/admin/v1/accounts/nobody", ""), http.StatusNotFound)
	wantStatus(t, "the account", e.admin(http.MethodGet, "/admin/v1/accounts/acme", ""), http.StatusOK)
}
