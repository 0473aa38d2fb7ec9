package accounts_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// ownUsageBody is the envelope of a usage answer.
type ownUsageBody struct {
	Data struct {
		Account string  `json:"account"`
		Key     *string `json:"key"`
		Series  []struct {
			Group  string `json:"group"`
			Points []struct {
				Calls int64 `json:"calls"`
			} `json:"points"`
		} `json:"series"`
	} `json:"data"`
	Error string `json:"error"`
}

// calls returns the calls of each group.
func (b *ownUsageBody) calls() map[string]int64 {
	out := map[string]int64{}
	for _, s := range b.Data.Series {
		for _, p := range s.Points {
			out[s.Group] += p.Calls
		}
	}
	return out
}

// startSession starts a session with key through POST /v1/account/session and returns
// its token (kind "token") or its cookie and CSRF token (kind "cookie").
func (e *usageEnv) startSession(t *testing.T, key, kind string) (token string, cookie *http.Cookie, csrf string) {
	t.Helper()
	status, raw, hdr := e.do(t, http.MethodPost, "/v1/account/session", key, `{"kind":"`+kind+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/account/session (%s): %d %s", kind, status, raw)
	}
	var b struct {
		Data struct {
			Token string `json:"token"`
			CSRF  string `json:"csrf_token"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatal(err)
	}
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if c.Name == session.InsecureCookieName {
			cookie = c
		}
	}
	if kind == "cookie" && cookie == nil {
		t.Fatalf("POST /v1/account/session: no cookie in %v", hdr)
	}
	return b.Data.Token, cookie, b.Data.CSRF
}

// Usage over time through both front doors, GET /v1/analytics (its time-series form)
// and GET /v1/account/usage: the primary key sees the whole account; a sub-key, and a
// session started with it, see only the sub-key's calls and are refused another key's;
// a cookie session reads it with GET and no CSRF token; a bad parameter is a 400 naming
// it. The keys' last_used appears once the usage is flushed.
func TestOwnUsage(t *testing.T) {
	for name, newStore := range usageStores(t) {
		t.Run(name, func(t *testing.T) {
			env := newUsageEnv(t, sharedStores(), newStore(t))
			acct, primary, primaryValue, sub, subValue := env.account(t, "pro")
			other, otherValue, err := env.mgr.CreateKey(t.Context(), acct.ID, accounts.NewKey{Name: "other"})
			if err != nil {
				t.Fatal(err)
			}
			idle, _, err := env.mgr.CreateKey(t.Context(), acct.ID, accounts.NewKey{Name: "idle"})
			if err != nil {
				t.Fatal(err)
			}
			_, _, strangerValue, _, _ := env.account(t, "pro")
			for _, c := range []struct{ path, key string }{
				{"/v1/sleep?ms=5", primaryValue}, {"/v1/sleep?ms=5", primaryValue},
				{"/v1/reject", subValue}, {"/v1/sleep", otherValue}, {"/v1/sleep", strangerValue},
			} {
				env.do(t, http.MethodGet, c.path, c.key, "")
			}

			// last_used: nothing before the flush, the flushed time after it.
			lastUsed := func(key string) map[string]*time.Time {
				t.Helper()
				status, raw, _ := env.do(t, http.MethodGet, "/v1/account/keys", key, "")
				if status != http.StatusOK {
					t.Fatalf("GET /v1/account/keys: %d %s", status, raw)
				}
				var b struct {
					Data struct {
						Keys []map[string]json.RawMessage `json:"keys"`
					} `json:"data"`
				}
				if err := json.Unmarshal([]byte(raw), &b); err != nil {
					t.Fatal(err)
				}
				out := map[string]*time.Time{}
				for _, k := range b.Data.Keys {
					var id string
					var last *time.Time
					json.Unmarshal(k["id"], &id)
					raw, ok := k["last_used"]
					if !ok {
						t.Fatalf("key %s has no last_used field: %s", id, raw)
					}
					if err := json.Unmarshal(raw, &last); err != nil {
						t.Fatal(err)
					}
					out[id] = last
				}
				return out
			}
			for id, last := range lastUsed(primaryValue) {
				if last != nil {
					t.Errorf("before the flush, key %s was last used %v; want null", id, last)
				}
			}
			if err := env.rec.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			want, err := env.mgr.KeysLastUsed(t.Context(), acct.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := lastUsed(primaryValue)
			for _, k := range []auth.Key{primary, sub, other} {
				if got[k.ID] == nil || !got[k.ID].Equal(want[k.ID]) || got[k.ID].Before(usageT0) {
					t.Errorf("key %s last used %v, want %v", k.Name, got[k.ID], want[k.ID])
				}
			}
			if last, ok := got[idle.ID]; !ok || last != nil || len(got) != 4 {
				t.Errorf("keys %v: want 4, the idle one with last_used null", got)
			}
			// A sub-key lists only itself, and learns nothing of the others' use.
			if got := lastUsed(subValue); len(got) != 1 || got[sub.ID] == nil {
				t.Errorf("the sub-key's listing: %v, want only itself, used", got)
			}
			// GET /v1/account carries last_used too.
			if status, raw, _ := env.do(t, http.MethodGet, "/v1/account", primaryValue, ""); status != 200 ||
				strings.Count(raw, `"last_used":"`) != 3 || strings.Count(raw, `"last_used":null`) != 1 {
				t.Errorf("GET /v1/account: %d %s; want 3 keys with last_used and 1 without", status, raw)
			}

			subToken, _, _ := env.startSession(t, subValue, "token")
			primaryToken, _, _ := env.startSession(t, primaryValue, "token")

			// The summary form of GET /v1/analytics counts the calls of the period the
			// same way: the whole account's for the primary key, its own for a sub-key
			// or a session acting as it (a call the API rejected counts: it was
			// charged).
			for _, c := range []struct {
				hdr  []string
				want map[string]int64
			}{
				{[]string{"X-Api-Key", primaryValue}, map[string]int64{"sleep": 3, "reject": 1}},
				{[]string{"X-Jwt", primaryToken}, map[string]int64{"sleep": 3, "reject": 1}},
				{[]string{"X-Api-Key", subValue}, map[string]int64{"reject": 1}},
				{[]string{"X-Jwt", subToken}, map[string]int64{"reject": 1}},
				{[]string{"X-Api-Key", otherValue}, map[string]int64{"sleep": 1}},
			} {
				status, raw, _ := env.do(t, http.MethodGet, "/v1/analytics", "", "", c.hdr...)
				var b struct {
					Data struct {
						Calls map[string]int64 `json:"calls"`
					} `json:"data"`
				}
				if err := json.Unmarshal([]byte(raw), &b); status != http.StatusOK || err != nil || !maps.Equal(b.Data.Calls, c.want) {
					t.Errorf("GET /v1/analytics with %s: %d %s; want calls %v", c.hdr[0], status, raw, c.want)
				}
			}
			_, cookie, _ := env.startSession(t, primaryValue, "cookie")
			_, subCookieValue, _ := env.startSession(t, subValue, "cookie")
			byKey := url.Values{"from": {"2030-01-15"}, "to": {"2030-01-16"}, "by": {"key"}}
			withKey := func(id string) url.Values {
				v := url.Values{"from": {"2030-01-15"}, "to": {"2030-01-16"}, "by": {"key"}, "key": {id}}
				return v
			}
			whole := map[string]int64{primary.ID: 2, sub.ID: 1, other.ID: 1}
			type cred struct {
				name string
				hdr  []string
			}
			var (
				primaryKey   = cred{"primary key", []string{"X-Api-Key", primaryValue}}
				subKey       = cred{"sub-key", []string{"X-Api-Key", subValue}}
				subSession   = cred{"session of the sub-key", []string{"X-Jwt", subToken}}
				primarySess  = cred{"session of the primary key", []string{"X-Jwt", primaryToken}}
				primaryCook  = cred{"cookie session of the primary key", []string{"Cookie", cookie.Name + "=" + cookie.Value}}
				subCookie    = cred{"cookie session of the sub-key", []string{"Cookie", subCookieValue.Name + "=" + subCookieValue.Value}}
				viaAnalytics = []string{"/v1/analytics", "/v1/account/usage"}
				viaAccount   = []string{"/v1/account/usage"}
			)
			for _, c := range []struct {
				paths   []string
				who     cred
				params  url.Values
				status  int
				want    map[string]int64 // calls per key
				keyFilt string
			}{
				{viaAnalytics, primaryKey, byKey, 200, whole, ""},
				{viaAnalytics, primaryKey, withKey(other.ID), 200, map[string]int64{other.ID: 1}, other.ID},
				{viaAnalytics, primarySess, byKey, 200, whole, ""},
				{viaAnalytics, subKey, byKey, 200, map[string]int64{sub.ID: 1}, sub.ID},
				{viaAnalytics, subKey, withKey(sub.ID), 200, map[string]int64{sub.ID: 1}, sub.ID},
				{viaAnalytics, subKey, withKey(primary.ID), 403, nil, ""},
				{viaAnalytics, subSession, byKey, 200, map[string]int64{sub.ID: 1}, sub.ID},
				{viaAnalytics, subSession, withKey(other.ID), 403, nil, ""},
				{viaAccount, primaryCook, byKey, 200, whole, ""},
				{viaAccount, subCookie, byKey, 200, map[string]int64{sub.ID: 1}, sub.ID},
				{viaAccount, subCookie, withKey(primary.ID), 403, nil, ""},
			} {
				for _, path := range c.paths {
					status, raw, hdr := env.do(t, http.MethodGet, path+"?"+c.params.Encode(), "", "", c.who.hdr...)
					var b ownUsageBody
					if err := json.Unmarshal([]byte(raw), &b); err != nil {
						t.Fatalf("%s, %s: %d %s", path, c.who.name, status, raw)
					}
					switch {
					case status != c.status:
						t.Errorf("%s?%s with the %s: %d %s, want %d", path, c.params.Encode(), c.who.name, status, raw, c.status)
					case status == 403:
						if hdr.Get("X-Error-Code") != "forbidden" || !strings.HasPrefix(b.Error, "key:") {
							t.Errorf("%s?%s with the %s: %s %q, want forbidden naming key", path, c.params.Encode(), c.who.name, hdr.Get("X-Error-Code"), b.Error)
						}
					default:
						filt := ""
						if b.Data.Key != nil {
							filt = *b.Data.Key
						}
						if got := b.calls(); b.Data.Account != acct.ID || filt != c.keyFilt || len(got) != len(c.want) {
							t.Errorf("%s?%s with the %s: %s, want calls %v, key filter %q", path, c.params.Encode(), c.who.name, raw, c.want, c.keyFilt)
						} else {
							for k, n := range c.want {
								if got[k] != n {
									t.Errorf("%s with the %s: key %s made %d calls, want %d", path, c.who.name, k, got[k], n)
								}
							}
						}
					}
				}
			}

			// Bad parameters: a 400 naming the parameter, on the self-service route.
			for _, c := range []struct {
				params url.Values
				param  string
			}{
				{url.Values{"from": {"yesterday"}}, "from"},
				{url.Values{"to": {"2030-13-01"}}, "to"},
				{url.Values{"interval": {"week"}}, "interval"},
				{url.Values{"by": {"plan"}}, "by"},
				{url.Values{"from": {"2030-01-15"}, "to": {"2030-01-14"}}, "to"},
				{url.Values{"interval": {"minute"}, "from": {"2030-01-01"}, "to": {"2030-01-03"}}, "to"},
				{url.Values{"channel": {"a\x00"}}, "channel"},
			} {
				status, raw, hdr := env.do(t, http.MethodGet, "/v1/account/usage?"+c.params.Encode(), primaryValue, "")
				var b ownUsageBody
				json.Unmarshal([]byte(raw), &b)
				if status != 400 || hdr.Get("X-Error-Code") != "invalid_input" || !strings.HasPrefix(b.Error, c.param+":") {
					t.Errorf("/v1/account/usage?%s: %d %s %q, want 400 invalid_input naming %s", c.params.Encode(), status, hdr.Get("X-Error-Code"), b.Error, c.param)
				}
			}
			// Another account's key sees its own account only, whatever it names.
			status, raw, _ := env.do(t, http.MethodGet, "/v1/account/usage?by=key&from=2030-01-15", strangerValue, "")
			if status != 200 || strings.Contains(raw, acct.ID) || strings.Contains(raw, primary.ID) {
				t.Errorf("another account's key: %d %s", status, raw)
			}
			// Credentials: none is the edge's 403, an unknown key 401.
			if status, _, _ := env.do(t, http.MethodGet, "/v1/account/usage", "", ""); status != 403 {
				t.Errorf("/v1/account/usage without a key: %d, want 403", status)
			}
			if status, _, _ := env.do(t, http.MethodGet, "/v1/account/usage", auth.NewKeyValue(), ""); status != 401 {
				t.Errorf("/v1/account/usage with an unknown key: %d, want 401", status)
			}
			// The self-service route takes GET only.
			if status, _, hdr := env.do(t, http.MethodPost, "/v1/account/usage", primaryValue, "{}"); status != 405 || !strings.Contains(hdr.Get("Allow"), "GET") {
				t.Errorf("POST /v1/account/usage: %d (Allow %q), want 405", status, hdr.Get("Allow"))
			}
			// No key value in the logs.
			for _, v := range []string{primaryValue, subValue, otherValue, subToken, primaryToken, cookie.Value} {
				if strings.Contains(env.logs.String(), v) {
					t.Error("a key value or session token appears in the logs")
				}
			}
		})
	}
}

// A service that records no usage answers GET /v1/account/usage and the time-series
// /v1/analytics with 404 saying so, and lists keys with last_used null.
func TestOwnUsageOff(t *testing.T) {
	env := newUsageEnv(t, sharedStores(), nil)
	_, _, value, _, subValue := env.account(t, "pro")
	env.do(t, http.MethodGet, "/v1/sleep", value, "")
	// The summary form of /v1/analytics: the account's calls for the primary key,
	// and null for a sub-key, whose own calls only the usage statistics count.
	for key, want := range map[string]string{value: `"calls":{"sleep":1}`, subValue: `"calls":null`} {
		if status, raw, _ := env.do(t, http.MethodGet, "/v1/analytics", key, ""); status != 200 || !strings.Contains(raw, want) {
			t.Errorf("GET /v1/analytics without usage: %d %s, want %s", status, raw, want)
		}
	}
	for _, path := range []string{"/v1/account/usage", "/v1/analytics?interval=day"} {
		status, raw, hdr := env.do(t, http.MethodGet, path, value, "")
		if status != 404 || hdr.Get("X-Error-Code") != "not_found" || !strings.Contains(raw, "records no usage") {
			t.Errorf("GET %s without usage: %d %s, want 404 saying the service records no usage", path, status, raw)
		}
	}
	for _, path := range []string{"/v1/account", "/v1/account/keys"} {
		status, raw, _ := env.do(t, http.MethodGet, path, value, "")
		if status != 200 || strings.Count(raw, `"last_used":null`) != 2 || strings.Contains(raw, `"last_used":"`) {
			t.Errorf("GET %s without usage: %d %s, want two keys with last_used null", path, status, raw)
		}
	}
}

// lastUsedDown is a memory usage store whose LastUsed fails while down, as a database
// that cannot be reached does.
type lastUsedDown struct {
	*memory.UsageStore
	down atomic.Bool
}

func (s *lastUsedDown) LastUsed(ctx context.Context, account string) (map[string]time.Time, error) {
	if s.down.Load() {
		return nil, errors.New("connection refused")
	}
	return s.UsageStore.LastUsed(ctx, account)
}

// When the usage store cannot say when keys were last used, the keys are listed all
// the same, without last_used, and the failure is logged at WARN (not ERROR: the
// listing did not fail).
func TestOwnKeysUsageStoreDown(t *testing.T) {
	us := &lastUsedDown{UsageStore: memory.NewUsageStore()}
	env := newUsageEnv(t, sharedStores(), us)
	acct, _, value, _, _ := env.account(t, "pro")
	env.do(t, http.MethodGet, "/v1/sleep", value, "")
	if err := env.rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status, raw, _ := env.do(t, http.MethodGet, "/v1/account/keys", value, ""); status != 200 || !strings.Contains(raw, `"last_used":"`) {
		t.Fatalf("GET /v1/account/keys with the store up: %d %s", status, raw)
	}
	us.down.Store(true)
	for _, path := range []string{"/v1/account", "/v1/account/keys"} {
		status, raw, _ := env.do(t, http.MethodGet, path, value, "")
		if status != 200 || strings.Count(raw, `"last_used":null`) != 2 || !strings.Contains(raw, acct.ID) {
			t.Errorf("GET %s with the usage store down: %d %s, want the keys with last_used null", path, status, raw)
		}
	}
	warned := 0
	for _, r := range env.logs.Records(t) {
		switch {
		case r.Level == "ERROR":
			t.Errorf("logged at ERROR: %s %v", r.Msg, r.Attrs)
		case r.Level == "WARN" && strings.Contains(r.Msg, "last used") && r.Attrs["account"] == acct.ID:
			warned++
		}
	}
	if warned != 2 {
		t.Errorf("%d WARNs about the keys' last use, want 2 (one per listing): %s", warned, env.logs.String())
	}
}
