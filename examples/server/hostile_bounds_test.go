package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The hostile suite's attacks on growth (issue 28, item 3): self-service requests are
// free, so an account holder who repeats them must meet a bound, not make the service
// store more and more.

// newAccount creates an account through the admin API and returns its key's value.
func (s *server) newAccount(id string) string {
	s.t.Helper()
	r := s.call(http.MethodPost, "/admin/v1/accounts", `{"id":"`+id+`","plan":"open"}`, "Authorization", "Bearer "+testAdminToken)
	if r.status != http.StatusCreated {
		s.t.Fatalf("creating account %s: %d %s", id, r.status, r.body)
	}
	return r.data(s.t)["value"].(string)
}

// errorOf returns the error message of an error envelope.
func errorOf(r reply) string {
	var env struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(r.body, &env)
	return env.Error
}

// keysPage is a page of a listing of keys.
type keysPage struct {
	Keys []struct {
		ID      string `json:"id"`
		Revoked bool   `json:"revoked"`
	} `json:"keys"`
	Next *string `json:"next"`
}

func (r reply) keysPage(t *testing.T) keysPage {
	t.Helper()
	var env struct {
		Status string   `json:"status"`
		Data   keysPage `json:"data"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Status != "ok" {
		t.Fatalf("not a page of keys (%v): %.300s", err, r.body)
	}
	return env.Data
}

// TestHostileKeyGrowth creates and revokes keys of one account in a loop, as an
// attacker would to grow what the service stores: the service refuses the creations
// once the account holds its cap of keys, counting the revoked ones; every listing of
// the keys (the account API, the account read, the admin API) is a bounded page whose
// cursor walks them all; and a page larger than the bound is refused.
func TestHostileKeyGrowth(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	key := s.newAccount("grower")
	auth := []string{"X-Api-Key", key}
	const tries = 300
	created, refused := 0, reply{}
	for range tries {
		r := s.call(http.MethodPost, "/v1/account/keys", `{"name":"churn"}`, auth...)
		if r.status != http.StatusCreated {
			refused = r
			break
		}
		created++
		id := r.data(t)["key"].(map[string]any)["id"].(string)
		if r := s.call(http.MethodPost, "/v1/account/keys/"+id+"/revoke", "", auth...); r.status != http.StatusOK {
			t.Fatalf("revoking %s: %d %s", id, r.status, r.body)
		}
	}
	switch {
	case created == tries:
		t.Fatalf("%d keys created and revoked, none refused: an account grows its keys without bound", tries)
	case created > 100:
		t.Errorf("%d keys created and revoked before the first refusal; want at most 100 (the default cap)", created)
	case refused.status != http.StatusConflict || !strings.Contains(errorOf(refused), "revoked within"):
		t.Errorf("the refusal after %d keys: %d %s; want 409 saying that revoked keys count", created, refused.status, refused.body)
	}
	t.Logf("refused after %d keys created and revoked: %d %s", created, refused.status, errorOf(refused))

	// Every listing is a bounded page; the cursors walk every key once.
	seen := map[string]bool{}
	next := ""
	pages := 0
	for {
		path := "/v1/account/keys"
		if next != "" {
			path += "?" + url.Values{"cursor": {next}}.Encode()
		}
		r := s.call(http.MethodGet, path, "", auth...)
		page := r.keysPage(t)
		pages++
		if len(page.Keys) > 50 || len(r.body) > 32<<10 {
			t.Errorf("GET %s: %d keys in %d bytes; want at most 50 keys by default", path, len(page.Keys), len(r.body))
		}
		for _, k := range page.Keys {
			if seen[k.ID] {
				t.Errorf("key %s listed twice", k.ID)
			}
			seen[k.ID] = true
		}
		if page.Next == nil {
			break
		}
		if next = *page.Next; pages > 10 {
			t.Fatal("more than 10 pages of keys")
		}
	}
	if len(seen) != created+1 {
		t.Errorf("the pages list %d keys, want %d (the primary key and the %d created)", len(seen), created+1, created)
	}
	if r := s.call(http.MethodGet, "/v1/account/keys?limit=500", "", auth...); r.status != http.StatusBadRequest {
		t.Errorf("a page of 500 keys: %d %s, want 400", r.status, r.body)
	}
	if r := s.call(http.MethodGet, "/v1/account/keys?cursor=key_nope", "", auth...); r.status != http.StatusBadRequest || !strings.HasPrefix(errorOf(r), "cursor") {
		t.Errorf("a cursor that names no key: %d %s, want 400 naming the cursor", r.status, r.body)
	}
	acct := s.call(http.MethodGet, "/v1/account", "", auth...).data(t)
	if keys := acct["keys"].([]any); len(keys) > 50 || acct["keys_next"] == nil {
		t.Errorf("GET /v1/account: %d keys, keys_next %v; want the first page of 50 and its cursor", len(keys), acct["keys_next"])
	}

	admin := []string{"Authorization", "Bearer " + testAdminToken}
	r := s.call(http.MethodGet, "/admin/v1/accounts/grower/keys?limit=20", "", admin...)
	if page := r.keysPage(t); len(page.Keys) != 20 || page.Next == nil {
		t.Errorf("GET /admin/v1/accounts/grower/keys?limit=20: %d keys, next %v; want 20 and a cursor", len(page.Keys), page.Next)
	}
	info := s.call(http.MethodGet, "/admin/v1/accounts/grower", "", admin...).data(t)
	if keys := info["keys"].([]any); len(keys) > 50 || info["keys_next"] == nil {
		t.Errorf("GET /admin/v1/accounts/grower: %d keys, keys_next %v; want the first page of 50 and its cursor", len(keys), info["keys_next"])
	}
}

// TestHostileSessionChurn starts and ends sessions of one account in a loop, through the
// session API and the dashboard's sign-in form: both are free and leave records (the
// audit entries, the ended session), so the account's self-service budget refuses the
// starts beyond it with 429, Retry-After and a message that says when to retry; the
// sign-out of a session started before is never refused.
func TestHostileSessionChurn(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	key := s.newAccount("churner")
	const tries = 300
	started, refused, last := 0, reply{}, ""
	for range tries {
		r := s.call(http.MethodPost, "/v1/account/session", `{"kind":"token"}`, "X-Api-Key", key)
		if r.status != http.StatusCreated {
			refused = r
			break
		}
		started++
		if last != "" {
			if r := s.call(http.MethodDelete, "/v1/account/session", "", "X-Jwt", last); r.status != http.StatusOK {
				t.Fatalf("signing out: %d %s", r.status, r.body)
			}
		}
		last = r.data(t)["token"].(string)
	}
	switch {
	case started == tries:
		t.Fatalf("%d sessions started and ended, none refused: an account's sessions leave records without bound", tries)
	case started > 100:
		t.Errorf("%d sessions started before the first refusal; want at most 100 (the default budget)", started)
	case refused.status != http.StatusTooManyRequests || refused.header.Get("Retry-After") == "" ||
		!strings.Contains(errorOf(refused), "try again in"):
		t.Errorf("the refusal after %d sessions: %d (Retry-After %q) %s; want 429 with Retry-After, saying when to retry",
			started, refused.status, refused.header.Get("Retry-After"), refused.body)
	}
	t.Logf("refused after %d sessions: %d, Retry-After %s: %s", started, refused.status, refused.header.Get("Retry-After"), errorOf(refused))

	// Signing out is never refused.
	if r := s.call(http.MethodDelete, "/v1/account/session", "", "X-Jwt", last); r.status != http.StatusOK {
		t.Errorf("signing out past the budget: %d %s, want 200", r.status, r.body)
	}
	// The dashboard's sign-in form spends the same budget.
	form := url.Values{"api_key": {key}}.Encode()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.srv.URL+"/dashboard/sign-in", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("the dashboard's sign-in past the budget: %d (Retry-After %q), want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// Another account is not held by this one's budget.
	if r := s.call(http.MethodPost, "/v1/account/session", `{"kind":"token"}`, "X-Api-Key", keyBeta); r.status != http.StatusCreated {
		t.Errorf("a session of another account: %d %s", r.status, r.body)
	}
}
