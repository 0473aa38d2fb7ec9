package multiinstance_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// selfService is a deployment's instances serving REST and the self-service API, with
// key caches, one audit log and one log capture.
type selfService struct {
	mgrs []*accounts.Manager // the managers of the instances' services
	urls []string
	logs *testenv.Logs
}

// startSelfService runs one instance per entry of manage (its manager's
// accounts.Options.SubKeysManageKeys) on d's shared stores. Every instance's audit log
// writes to the same audit store.
func startSelfService(t *testing.T, d deployment, manage ...bool) *selfService {
	t.Helper()
	s := &selfService{logs: &testenv.Logs{}}
	log := memory.NewAuditStore()
	clock := testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))
	for _, m := range manage {
		reg := &catalog.Registry{}
		if err := apis.Register(reg); err != nil {
			t.Fatal(err)
		}
		stores := d.stores(t)
		svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{
			Now: clock.Now, Logger: s.logs.Logger(), KeyCache: &auth.KeyCacheOptions{},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		auditLog := audit.NewLog(log, &audit.LogOptions{Now: clock.Now, Logger: s.logs.Logger()})
		svc.Events().Subscribe(auditLog, auditLog.Kinds()...)
		t.Cleanup(auditLog.Close)
		mgr, err := accounts.New(svc, &accounts.Options{Audit: log, SubKeysManageKeys: m, Logger: s.logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mgr.Close)
		rh, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr, Logger: s.logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		ah, err := selfservice.NewHandler(mgr, nil)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/v1/", rh)
		mux.Handle("/v1/account", ah)
		mux.Handle("/v1/account/", ah)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		s.mgrs, s.urls = append(s.mgrs, mgr), append(s.urls, srv.URL)
	}
	return s
}

// reply is an answer of either API, with its body as text for the secret checks.
type reply struct {
	status int
	text   string
	data   map[string]any
	err    string
}

func (s *selfService) do(t *testing.T, i int, method, path, key string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.urls[i]+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, text: string(raw)}
	var env struct {
		Data  map[string]any `json:"data"`
		Error *string        `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil {
		r.data = env.Data
		if env.Error != nil {
			r.err = *env.Error
		}
	}
	return r
}

func (r reply) want(t *testing.T, what string, status int, contains ...string) reply {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d (%s), want %d", what, r.status, r.text, status)
	}
	for _, c := range contains {
		if !strings.Contains(r.err, c) {
			t.Errorf("%s: error %q does not say %q", what, r.err, c)
		}
	}
	return r
}

// created returns the key id and value of a creation or rotation.
func (r reply) created(t *testing.T) (id, value string) {
	t.Helper()
	key, _ := r.data["key"].(map[string]any)
	id, _ = key["id"].(string)
	value, _ = r.data["value"].(string)
	if id == "" || value == "" {
		t.Fatalf("no key id and value in %s", r.text)
	}
	return id, value
}

// TestSelfServiceOnEveryStore drives the self-service API over HTTP on every
// deployment, with key caches on several instances: keys it creates work at once
// within their restrictions, rotations and narrowings hold on the very next call on
// another instance, sub-keys cannot exceed themselves, attackers' inputs are refused
// with reasons, and every change is in the audit log with no key value there or in
// the logs.
func TestSelfServiceOnEveryStore(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			s := startSelfService(t, d, false, false, true)
			_, _, primary, err := s.mgrs[0].CreateAccount(t.Context(), accounts.Spec{Plan: "open"})
			if err != nil {
				t.Fatal(err)
			}
			_, _, otherValue, err := s.mgrs[0].CreateAccount(t.Context(), accounts.Spec{Plan: "open"})
			if err != nil {
				t.Fatal(err)
			}
			secrets := []string{primary, otherValue}
			allowed, outside := "/v1/uuid-generator", "/v1/date-info?date=2030-01-15"

			// A sub-key created through the API works at once, within its restrictions.
			subID, sub := s.do(t, 0, "POST", "/v1/account/keys", primary, map[string]any{
				"name": "ci", "apis": []string{"uuid-generator"}}).want(t, "create a sub-key", 201).created(t)
			secrets = append(secrets, sub)
			s.do(t, 1, "GET", allowed, sub, nil).want(t, "the new sub-key on its API", 200)
			s.do(t, 1, "GET", outside, sub, nil).want(t, "the new sub-key on another API", 403)

			// Narrowing: enforced on the next call on another instance, whose cache
			// holds the key (the call above put it there).
			s.do(t, 0, "PATCH", "/v1/account/keys/"+subID, primary, map[string]any{
				"restrictions": map[string]any{"apis": []string{"uuid-generator"}, "channels": []string{"graphql"}}}).
				want(t, "narrow the sub-key to GraphQL", 200)
			s.do(t, 1, "GET", allowed, sub, nil).want(t, "the narrowed sub-key over REST", 403, "rest")
			s.do(t, 0, "PATCH", "/v1/account/keys/"+subID, primary, map[string]any{
				"restrictions": map[string]any{"apis": []string{"uuid-generator", "echo"}}}).
				want(t, "widen the sub-key", 403, "apis")

			twoID, two := s.do(t, 0, "POST", "/v1/account/keys", primary, map[string]any{
				"name": "two", "apis": []string{"uuid-generator", "date-info"}}).want(t, "create a two-API key", 201).created(t)
			secrets = append(secrets, two)
			s.do(t, 1, "GET", outside, two, nil).want(t, "the two-API key on its second API", 200)
			s.do(t, 0, "PATCH", "/v1/account/keys/"+twoID, primary, map[string]any{"name": "one",
				"restrictions": map[string]any{"apis": []string{"uuid-generator"}}}).want(t, "narrow the two-API key", 200)
			s.do(t, 1, "GET", outside, two, nil).want(t, "the narrowed key on the API it lost", 403, "date-info")
			s.do(t, 1, "GET", allowed, two, nil).want(t, "the narrowed key on the API it kept", 200)

			// Rotation: the old value is refused on the next call on every instance.
			rotID, rot := s.do(t, 0, "POST", "/v1/account/keys", primary, map[string]any{"name": "rotating"}).
				want(t, "create a key to rotate", 201).created(t)
			s.do(t, 1, "GET", allowed, rot, nil).want(t, "the key before its rotation", 200)
			_, rotated := s.do(t, 0, "POST", "/v1/account/keys/"+rotID+"/rotate", primary, nil).
				want(t, "rotate", 200).created(t)
			secrets = append(secrets, rot, rotated)
			s.do(t, 1, "GET", allowed, rot, nil).want(t, "the old value after the rotation", 401)
			s.do(t, 1, "GET", allowed, rotated, nil).want(t, "the new value", 200)

			// Sub-keys: without the option, no management; with it, never wider.
			s.do(t, 0, "POST", "/v1/account/keys", rotated, map[string]any{"name": "x"}).
				want(t, "a sub-key creating a key without the option", 403, "sub-key")
			s.do(t, 2, "POST", "/v1/account/keys", sub, map[string]any{"name": "wider"}).
				want(t, "a sub-key creating a wider key", 403, "apis")
			narrowID, narrow := s.do(t, 2, "POST", "/v1/account/keys", sub, map[string]any{
				"name": "narrower", "apis": []string{"uuid-generator"}, "channels": []string{"graphql"}}).
				want(t, "a sub-key creating a key within itself", 201).created(t)
			secrets = append(secrets, narrow)
			s.do(t, 2, "POST", "/v1/account/keys/"+rotID+"/revoke", sub, nil).
				want(t, "a sub-key revoking a wider key", 403)
			s.do(t, 0, "DELETE", "/v1/account/keys/"+narrowID, primary, nil).want(t, "revoke a key", 200)

			// Another account's key, odd ids, attackers' bodies.
			s.do(t, 0, "POST", "/v1/account/keys/"+subID+"/rotate", otherValue, nil).
				want(t, "another account rotating the key", 404)
			for _, id := range []string{"..%2F..%2Fadmin", "%2e%2e", "key_" + strings.Repeat("a", 100)} {
				if r := s.do(t, 0, "POST", "/v1/account/keys/"+id+"/revoke", primary, nil); r.status != 404 && r.status != 400 {
					t.Errorf("revoking key %q: status %d (%s), want 404 or 400", id, r.status, r.text)
				}
			}
			s.do(t, 0, "POST", "/v1/account/keys", primary, bytes.Repeat([]byte("x"), 70<<10)).want(t, "a huge body", 413)
			s.do(t, 0, "POST", "/v1/account/keys", primary, map[string]any{"name": "x", "admin": true}).
				want(t, "an unknown field", 400, "admin")
			s.do(t, 0, "POST", "/v1/account/keys", primary, map[string]any{"name": "nul\x00"}).
				want(t, "a NUL in the name", 400, "name")
			s.do(t, 0, "POST", "/v1/account/keys", primary, []byte("{\"name\":\"bad\xff\"}")).
				want(t, "invalid UTF-8", 400, "UTF-8")
			s.do(t, 0, "POST", "/v1/account/keys", primary, map[string]any{"name": "x", "value": auth.NewKeyValue()}).
				want(t, "a chosen value", 400)
			s.do(t, 0, "DELETE", "/v1/account/keys/"+primaryID(t, s, primary), primary, nil).
				want(t, "revoking the primary key", 403, "primary")

			// Not billed: the balance does not move with self-service requests.
			before := s.do(t, 0, "GET", "/v1/account", primary, nil).want(t, "the account", 200).data["balance"]
			s.do(t, 1, "GET", "/v1/account/keys", primary, nil).want(t, "the keys", 200)
			after := s.do(t, 1, "GET", "/v1/account", primary, nil).want(t, "the account", 200).data["balance"]
			if !jsonEqual(before, after) {
				t.Errorf("self-service requests moved the balance: %v -> %v", before, after)
			}

			// The audit log: every change, with the actor and the address.
			r := s.do(t, 1, "GET", "/v1/account/audit?limit=100", primary, nil).want(t, "the audit log", 200)
			entries, _ := r.data["entries"].([]any)
			actions := map[string]int{}
			pid := primaryID(t, s, primary)
			for _, raw := range entries {
				e, _ := raw.(map[string]any)
				action, _ := e["action"].(string)
				actions[action]++
				if action == "account.create" {
					continue
				}
				actor, _ := e["actor"].(string)
				if actor != pid && actor != subID {
					t.Errorf("audit entry %v: actor %q, want the acting key", e, actor)
				}
				if e["address"] != "127.0.0.1" {
					t.Errorf("audit entry %v: address %v, want 127.0.0.1", e, e["address"])
				}
			}
			for action, n := range map[string]int{"key.create": 4, "key.update": 2, "key.rotate": 1, "key.revoke": 1} {
				if actions[action] != n {
					t.Errorf("audit log has %d %s entries, want %d: %v", actions[action], action, n, actions)
				}
			}
			s.do(t, 0, "GET", "/v1/account/audit", sub, nil).want(t, "a sub-key reading the audit log without the option", 403)
			for _, secret := range secrets {
				if strings.Contains(r.text, secret) {
					t.Errorf("a key value is in the audit log")
				}
				if strings.Contains(s.logs.String(), secret) {
					t.Errorf("a key value is in the logs")
				}
			}
		})
	}
}

// primaryID returns the id of the primary key whose value is primary.
func primaryID(t *testing.T, s *selfService, primary string) string {
	t.Helper()
	id, _ := s.do(t, 0, "GET", "/v1/account", primary, nil).data["key_id"].(string)
	if id == "" {
		t.Fatal("GET /v1/account names no key_id")
	}
	return id
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
