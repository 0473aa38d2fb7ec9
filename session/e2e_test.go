package session_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/wire"
)

var secret = []byte("session-test-secret-0123456789abcdef")

// clock is the injected clock every instance of a test shares.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// backend makes the shared stores of one deployment.
type backend struct {
	name   string
	stores func(t *testing.T) (tollgate.Stores, auth.SessionStore)
}

func backends() []backend {
	return []backend{
		{"memory", func(t *testing.T) (tollgate.Stores, auth.SessionStore) {
			return tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
				Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, memory.NewSessionStore()
		}},
		{"postgres", func(t *testing.T) (tollgate.Stores, auth.SessionStore) {
			stores, ended, _ := onPostgres(t)
			return stores, ended
		}},
		{"redis", func(t *testing.T) (tollgate.Stores, auth.SessionStore) {
			stores, ended, _, _ := onRedis(t)
			return stores, ended
		}},
	}
}

// onPostgres returns every store on a fresh PostgreSQL schema, and the pool.
func onPostgres(t *testing.T) (tollgate.Stores, auth.SessionStore, *pgxpool.Pool) {
	t.Helper()
	dsn := testenv.Var(t, testenv.Postgres)
	pool := testenv.PostgresPool(t, dsn, testenv.PostgresSchema(t, dsn), 8)
	if err := postgres.Migrate(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ended, err := postgres.NewSessionStore(pool)
	if err != nil {
		t.Fatal(err)
	}
	return tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}, ended, pool
}

// onRedis returns every store on a fresh Redis prefix, the client and the prefix.
func onRedis(t *testing.T) (tollgate.Stores, auth.SessionStore, *goredis.Client, string) {
	t.Helper()
	c := testenv.RedisClient(t, testenv.Var(t, testenv.Redis))
	prefix := testenv.RedisPrefix(t, c)
	s, err := redis.New(c, &redis.Options{Prefix: prefix, CallerClock: true})
	if err != nil {
		t.Fatal(err)
	}
	return tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}, s, c, prefix
}

// forEachBackend runs f on every backend.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// instance is one service of a deployment, with its manager, served over httptest.
type instance struct {
	svc *tollgate.Service
	mgr *accounts.Manager
	srv *httptest.Server
}

// deployment is several instances on one set of stores, one clock, one audit log and
// one log.
type deployment struct {
	t         *testing.T
	clock     *clock
	instances []instance
	audit     *memory.AuditStore
	logs      *bytes.Buffer
	logMu     *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// deploy starts one instance per element of caches (true: with a key cache) on the
// backend's stores. Each serves the REST front door at /v1/, the session routes, and
// at /v1/account/whoami a probe wrapped in Cookies, which answers whom the request
// acts for (POST stands for any state-changing self-service call).
func deploy(t *testing.T, b backend, login session.Login, caches ...bool) *deployment {
	t.Helper()
	return deployWith(t, b, login, nil, caches...)
}

// deployWith is deploy with the managers' options changed by opt (SubKeysManageKeys,
// say), if it is not nil.
func deployWith(t *testing.T, b backend, login session.Login, opt func(*accounts.Options), caches ...bool) *deployment {
	t.Helper()
	stores, ended := b.stores(t)
	reg := &catalog.Registry{}
	for _, id := range []string{"alpha", "beta"} {
		if err := reg.Register(catalog.API{ID: id, Method: http.MethodGet, Cost: 1,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{"api": id}, nil })}); err != nil {
			t.Fatal(err)
		}
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "p", Credits: 1000, RatePerMinute: 6000, Concurrency: 10})
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := auth.NewSessions(secret)
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{t: t, clock: &clock{t: time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)},
		audit: memory.NewAuditStore(), logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	logger := slog.New(slog.NewTextHandler(lockedWriter{d.logMu, d.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, cached := range caches {
		opts := &tollgate.Options{Now: d.clock.now, Logger: logger, Sessions: sessions, SessionStore: ended,
			SweepInterval: -1}
		if cached {
			opts.KeyCache = &auth.KeyCacheOptions{TTL: time.Hour}
		}
		svc, err := tollgate.New(reg, stores, plans, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		// Each instance records its changes in the one audit log.
		auditLog := audit.NewLog(d.audit, &audit.LogOptions{Now: d.clock.now, Logger: logger})
		svc.Events().Subscribe(auditLog, auditLog.Kinds()...)
		t.Cleanup(auditLog.Close)
		mgrOpts := &accounts.Options{Audit: d.audit, Logger: logger}
		if opt != nil {
			opt(mgrOpts)
		}
		mgr, err := accounts.New(svc, mgrOpts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mgr.Close)
		restH, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		sessH, err := session.NewHandler(mgr, &session.Options{Login: login, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/v1/", restH)
		mux.Handle("/v1/account/session", sessH)
		accountH, err := selfservice.NewHandler(mgr, nil)
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle("/v1/account", sessH.Cookies(accountH))
		mux.Handle("/v1/account/", sessH.Cookies(accountH))
		mux.Handle("/v1/account/whoami", sessH.Cookies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cred, err := edge.CredentialFrom(r.Header)
			if err != nil {
				http.Error(w, "no credential", http.StatusUnauthorized)
				return
			}
			p, err := svc.Authenticate(r.Context(), tollgate.Caller{Credential: cred, Verify: true})
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			fmt.Fprintf(w, "%s %s %s", r.Method, p.Account.ID, p.Key.ID)
		})))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		d.instances = append(d.instances, instance{svc: svc, mgr: mgr, srv: srv})
	}
	return d
}

// reply is an answer, read whole.
type reply struct {
	status int
	header http.Header
	body   string
}

func (r reply) data(t *testing.T) map[string]any {
	t.Helper()
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.body), &env); err != nil {
		t.Fatalf("not an envelope: %q", r.body)
	}
	return env.Data
}

// do sends a request to instance i; hdr holds headers as name, value pairs.
func (d *deployment) do(i int, method, path, body string, hdr ...string) reply {
	d.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(d.t.Context(), method, d.instances[i].srv.URL+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	for j := 0; j+1 < len(hdr); j += 2 {
		req.Header.Add(hdr[j], hdr[j+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, header: res.Header, body: string(b)}
}

func (d *deployment) want(r reply, status int, contains string) {
	d.t.Helper()
	if r.status != status || !strings.Contains(r.body, contains) {
		d.t.Errorf("got %d %q; want %d containing %q", r.status, r.body, status, contains)
	}
}

// account creates an account on instance 0 and returns its primary key value, and a
// sub-key limited to the API alpha with its value.
func (d *deployment) account(id string) (primary string, sub auth.Key, subValue string) {
	d.t.Helper()
	mgr := d.instances[0].mgr
	_, _, primary, err := mgr.CreateAccount(d.t.Context(), accounts.Spec{ID: id, Plan: "p"})
	if err != nil {
		d.t.Fatal(err)
	}
	r, err := auth.NewRestrictions(auth.RestrictionSpec{APIs: []string{"alpha"}})
	if err != nil {
		d.t.Fatal(err)
	}
	sub, subValue, err = mgr.CreateKey(d.t.Context(), id, accounts.NewKey{Name: "alpha only", Restrictions: r})
	if err != nil {
		d.t.Fatal(err)
	}
	return primary, sub, subValue
}

// startToken starts a token session with the key value on instance i.
func (d *deployment) startToken(i int, key string) (token string, info map[string]any) {
	d.t.Helper()
	r := d.do(i, "POST", "/v1/account/session", `{"kind":"token"}`, "X-Api-Key", key)
	if r.status != http.StatusCreated {
		d.t.Fatalf("starting a session: %d %s", r.status, r.body)
	}
	info = r.data(d.t)
	token, _ = info["token"].(string)
	if token == "" {
		d.t.Fatalf("a token session answered no token: %s", r.body)
	}
	return token, info
}

// cookieSession is a browser's session: its cookie and CSRF token.
type cookieSession struct {
	cookie string // "name=value", as a Cookie header
	csrf   string
	id     string
}

// startCookie starts a cookie session with the key value in the body, on instance i.
func (d *deployment) startCookie(i int, key string) cookieSession {
	d.t.Helper()
	r := d.do(i, "POST", "/v1/account/session", `{"api_key":"`+key+`"}`, "Content-Type", "application/json")
	if r.status != http.StatusCreated {
		d.t.Fatalf("starting a cookie session: %d %s", r.status, r.body)
	}
	data := r.data(d.t)
	if _, ok := data["token"]; ok {
		d.t.Errorf("a cookie session answered its token in the body: %s", r.body)
	}
	cookies := (&http.Response{Header: r.header}).Cookies()
	if len(cookies) != 1 {
		d.t.Fatalf("want one cookie, got %v", r.header.Values("Set-Cookie"))
	}
	c := cookies[0]
	if c.Name != session.InsecureCookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge <= 0 {
		d.t.Errorf("cookie %q: want %s, HttpOnly, SameSite=Strict, Path=/ and a Max-Age", r.header.Get("Set-Cookie"), session.InsecureCookieName)
	}
	return cookieSession{cookie: c.Name + "=" + c.Value, csrf: data["csrf_token"].(string), id: data["session_id"].(string)}
}

func TestSessionWithKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deploy(t, b, nil, true, false)
		primary, sub, subValue := d.account("acct")

		// A session of the primary key works on REST and analytics, on either instance.
		tok, info := d.startToken(0, primary)
		if info["account"] != "acct" || info["key_id"] == "" {
			t.Errorf("session start answered %v", info)
		}
		for i := range d.instances {
			d.want(d.do(i, "GET", "/v1/alpha", "", "X-Jwt", tok), 200, `"api":"alpha"`)
			d.want(d.do(i, "GET", "/v1/beta", "", "X-Jwt", tok), 200, `"api":"beta"`)
			d.want(d.do(i, "GET", "/v1/analytics", "", "X-Jwt", tok), 200, `"account":"acct"`)
		}

		// A session of the sub-key is held to the sub-key's restrictions.
		subTok, info := d.startToken(1, subValue)
		if info["key_id"] != sub.ID {
			t.Errorf("a sub-key's session acts as %v, want %s", info["key_id"], sub.ID)
		}
		for i := range d.instances {
			d.want(d.do(i, "GET", "/v1/alpha", "", "X-Jwt", subTok), 200, `"api":"alpha"`)
			d.want(d.do(i, "GET", "/v1/beta", "", "X-Jwt", subTok), 403, "may not call beta")
			d.want(d.do(i, "GET", "/v1/analytics", "", "X-Jwt", subTok), 200, sub.ID)
		}

		// A session cannot start another, which would outlive it.
		d.want(d.do(0, "POST", "/v1/account/session", "", "X-Jwt", subTok), 403, "cannot start another session")
	})
}

func TestKeyChangeEndsSession(t *testing.T) {
	changes := []struct {
		name   string
		change func(mgr *accounts.Manager, keyID string) error
		why    string
	}{
		{"rotate", func(mgr *accounts.Manager, id string) error {
			_, _, err := mgr.RotateKey(context.Background(), id)
			return err
		}, "rotated"},
		{"revoke", func(mgr *accounts.Manager, id string) error {
			_, err := mgr.RevokeKey(context.Background(), id)
			return err
		}, "revoked"},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, cached := range []bool{false, true} {
			for _, ch := range changes {
				t.Run(fmt.Sprintf("%s/cache=%v", ch.name, cached), func(t *testing.T) {
					d := deploy(t, b, nil, cached, cached)
					_, sub, subValue := d.account("acct")
					tok, _ := d.startToken(0, subValue)
					browser := d.startCookie(0, subValue)
					// Warm both instances' caches with the key and the session.
					for i := range d.instances {
						d.want(d.do(i, "GET", "/v1/alpha", "", "X-Api-Key", subValue), 200, "alpha")
						d.want(d.do(i, "GET", "/v1/alpha", "", "X-Jwt", tok), 200, "alpha")
					}
					// The key changes through instance 0; instance 1 refuses the
					// session on its very next request, paid or not.
					if err := ch.change(d.instances[0].mgr, sub.ID); err != nil {
						t.Fatal(err)
					}
					d.want(d.do(1, "GET", "/v1/alpha", "", "X-Jwt", tok), 401, ch.why)
					d.want(d.do(1, "GET", "/v1/analytics", "", "X-Jwt", tok), 401, ch.why)
					d.want(d.do(1, "GET", "/v1/account/whoami", "", "Cookie", browser.cookie), 401, ch.why)
					d.want(d.do(0, "GET", "/v1/alpha", "", "X-Jwt", tok), 401, ch.why)
				})
			}
		}
	})
}

func TestKeyExpiryEndsSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deploy(t, b, nil, true, false)
		d.account("acct")
		r, _ := auth.NewRestrictions(auth.RestrictionSpec{ExpiresAt: ptr(d.clock.now().Add(time.Hour))})
		_, value, err := d.instances[0].mgr.CreateKey(t.Context(), "acct", accounts.NewKey{Name: "short", Restrictions: r})
		if err != nil {
			t.Fatal(err)
		}
		tok, info := d.startToken(0, value)
		if got := info["expires_at"]; got != d.clock.now().Add(time.Hour).Format(time.RFC3339) {
			t.Errorf("a session of a key that expires in an hour expires at %v", got)
		}
		d.want(d.do(1, "GET", "/v1/alpha", "", "X-Jwt", tok), 200, "alpha")
		d.clock.advance(time.Hour)
		d.want(d.do(1, "GET", "/v1/alpha", "", "X-Jwt", tok), 401, "expired")
	})
}

func TestSessionExpires(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deploy(t, b, nil, true, false)
		primary, _, _ := d.account("acct")
		tok, _ := d.startToken(0, primary)
		d.clock.advance(accounts.DefaultSessionTTL - time.Second)
		d.want(d.do(1, "GET", "/v1/alpha", "", "X-Jwt", tok), 200, "alpha")
		d.clock.advance(time.Second)
		for i := range d.instances {
			d.want(d.do(i, "GET", "/v1/alpha", "", "X-Jwt", tok), 401, "expired")
			d.want(d.do(i, "GET", "/v1/account/session", "", "X-Jwt", tok), 401, "expired")
		}
	})
}

func TestSignOut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deploy(t, b, nil, true, false)
		primary, _, _ := d.account("acct")

		// A browser signs out on instance 0: the cookie is cleared, and instance 1
		// refuses the session, as cookie and as token.
		browser := d.startCookie(0, primary)
		d.want(d.do(1, "GET", "/v1/account/whoami", "", "Cookie", browser.cookie), 200, "GET acct key_")
		r := d.do(0, "DELETE", "/v1/account/session", "", "Cookie", browser.cookie, session.CSRFHeader, browser.csrf)
		d.want(r, 200, `"ended":true`)
		if sc := r.header.Get("Set-Cookie"); !strings.Contains(sc, session.InsecureCookieName+"=;") || !strings.Contains(sc, "Max-Age=0") {
			t.Errorf("sign-out set %q; want the cookie cleared", sc)
		}
		token := strings.TrimPrefix(browser.cookie, session.InsecureCookieName+"=")
		d.want(d.do(1, "GET", "/v1/account/whoami", "", "Cookie", browser.cookie), 401, "signed out")
		d.want(d.do(1, "GET", "/v1/alpha", "", "X-Jwt", token), 401, "signed out")
		d.want(d.do(0, "GET", "/v1/analytics", "", "X-Jwt", token), 401, "signed out")

		// A token client signs itself out with x-jwt; again is no error.
		tok, _ := d.startToken(1, primary)
		d.want(d.do(1, "DELETE", "/v1/account/session", "", "X-Jwt", tok), 200, `"ended":true`)
		d.want(d.do(0, "GET", "/v1/alpha", "", "X-Jwt", tok), 401, "signed out")
		d.want(d.do(0, "DELETE", "/v1/account/session", "", "X-Jwt", tok), 200, `"ended":true`)

		// Sign-out needs a session; a key is not one.
		d.want(d.do(0, "DELETE", "/v1/account/session", "", "X-Api-Key", primary), 401, "carries no session")

		// Both were recorded, with the key as actor and the address.
		page, err := d.audit.List(t.Context(), audit.Query{Account: "acct"})
		if err != nil {
			t.Fatal(err)
		}
		count := map[audit.Action]int{}
		for _, e := range page.Entries {
			count[e.Action]++
			if (e.Action == audit.SessionStart || e.Action == audit.SessionEnd) &&
				(!strings.HasPrefix(e.Actor, "key_") || !strings.HasPrefix(e.Target, "ses_") || e.Addr.String() != "127.0.0.1") {
				t.Errorf("audit entry %+v: want a key as actor, a session as target, the address", e)
			}
		}
		if count[audit.SessionStart] != 2 || count[audit.SessionEnd] != 2 {
			t.Errorf("audit log holds %d session starts and %d ends; want 2 and 2", count[audit.SessionStart], count[audit.SessionEnd])
		}
	})
}

func TestCSRF(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deploy(t, b, nil, true, false)
		primary, _, subValue := d.account("acct")
		browser := d.startCookie(0, primary)
		other := d.startCookie(0, primary)

		// GET needs no CSRF token; the page can read it from GET /v1/account/session.
		r := d.do(1, "GET", "/v1/account/session", "", "Cookie", browser.cookie)
		d.want(r, 200, browser.csrf)
		d.want(d.do(1, "GET", "/v1/account/whoami", "", "Cookie", browser.cookie), 200, "GET acct")

		tests := []struct {
			name   string
			hdr    []string
			status int
			says   string
		}{
			{"no token", []string{"Cookie", browser.cookie}, 403, "needs the X-CSRF-Token header"},
			{"wrong token", []string{"Cookie", browser.cookie, session.CSRFHeader, "x" + browser.csrf}, 403, "does not match this session"},
			{"another session's token", []string{"Cookie", browser.cookie, session.CSRFHeader, other.csrf}, 403, "does not match this session"},
			{"right token", []string{"Cookie", browser.cookie, session.CSRFHeader, browser.csrf}, 200, "POST acct"},
			{"right token, cross-site", []string{"Cookie", browser.cookie, session.CSRFHeader, browser.csrf, "Sec-Fetch-Site", "cross-site"}, 403, "another origin"},
			{"right token, other origin", []string{"Cookie", browser.cookie, session.CSRFHeader, browser.csrf, "Origin", "https://evil.example"}, 403, "another origin"},
			{"same origin", []string{"Cookie", browser.cookie, session.CSRFHeader, browser.csrf, "Sec-Fetch-Site", "same-origin"}, 200, "POST acct"},
			// A header credential wins: the cookie is ignored and no token is needed.
			{"key header and cookie", []string{"Cookie", browser.cookie, "X-Api-Key", subValue}, 200, "POST acct key_"},
		}
		for _, tt := range tests {
			r := d.do(1, "POST", "/v1/account/whoami", "", tt.hdr...)
			if r.status != tt.status || !strings.Contains(r.body, tt.says) {
				t.Errorf("%s: got %d %q; want %d saying %q", tt.name, r.status, r.body, tt.status, tt.says)
			}
			if tt.status == 403 && r.header.Get(wire.HeaderErrorCode) != "forbidden" {
				t.Errorf("%s: a refusal without the forbidden code: %v", tt.name, r.header)
			}
		}
		// The header's key is used, not the cookie's session: the sub-key answers.
		r = d.do(1, "POST", "/v1/account/whoami", "", "Cookie", browser.cookie, "X-Api-Key", subValue)
		if strings.HasSuffix(r.body, d.data(browser, 1)["key_id"].(string)) {
			t.Errorf("with a key header and a cookie, the cookie's session acted: %q", r.body)
		}
		// Signing out is state-changing too.
		d.want(d.do(0, "DELETE", "/v1/account/session", "", "Cookie", browser.cookie), 403, "X-CSRF-Token")
		d.want(d.do(1, "GET", "/v1/account/whoami", "", "Cookie", browser.cookie), 200, "GET acct")
		// A session may not be started from another site's page (login CSRF).
		d.want(d.do(0, "POST", "/v1/account/session", `{"api_key":"`+primary+`"}`, "Sec-Fetch-Site", "cross-site"), 403, "another origin")
	})
}

// TestSelfServiceWithSessions drives the account holders' API with sessions: a
// browser's cookie session needs its CSRF token to change anything, and a session
// started with a sub-key has that sub-key's rights, not the account's.
func TestSelfServiceWithSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deploy(t, b, nil, true, false)
		primary, sub, subValue := d.account("acct")
		browser := d.startCookie(0, primary)
		body := `{"name":"ci","apis":["alpha"]}`

		// A change made with the cookie alone is refused: another site could make it.
		d.want(d.do(1, "POST", "/v1/account/keys", body, "Cookie", browser.cookie), 403, "X-CSRF-Token")
		r := d.do(1, "POST", "/v1/account/keys", body, "Cookie", browser.cookie, session.CSRFHeader, browser.csrf)
		d.want(r, 201, `"value"`)
		key, _ := r.data(t)["key"].(map[string]any)
		created, _ := key["id"].(string)
		if created == "" {
			t.Fatalf("no key id in %s", r.body)
		}
		// The new key works at once, within its restrictions.
		value, _ := r.data(t)["value"].(string)
		d.want(d.do(0, "GET", "/v1/alpha", "", "X-Api-Key", value), 200, `"api":"alpha"`)
		d.want(d.do(0, "GET", "/v1/beta", "", "X-Api-Key", value), 403, "")

		// The audit log names the key the session acts as, never a value.
		page, err := d.instances[0].mgr.AuditLog(t.Context(), audit.Query{Account: "acct"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range page.Entries {
			if e.Action == audit.KeyCreate && e.Target == created {
				found = true
				if e.Actor == "" || e.Actor == sub.ID || strings.Contains(fmt.Sprint(e), value) {
					t.Errorf("key.create entry %+v: want the primary key as actor and no key value", e)
				}
			}
		}
		if !found {
			t.Errorf("no key.create entry for %s in %+v", created, page.Entries)
		}

		// A session started with the sub-key is held to the sub-key's rights: it may
		// read the account, not manage keys, though a session of the primary key may.
		token, _ := d.startToken(1, subValue)
		d.want(d.do(0, "GET", "/v1/account", "", "X-Jwt", token), 200, sub.ID)
		d.want(d.do(0, "POST", "/v1/account/keys", body, "X-Jwt", token), 403, "sub-key")
		d.want(d.do(0, "POST", "/v1/account/keys/"+created+"/revoke", "", "X-Jwt", token), 403, "sub-key")
		primaryToken, _ := d.startToken(1, primary)
		d.want(d.do(0, "POST", "/v1/account/keys/"+created+"/revoke", "", "X-Jwt", primaryToken), 200, created)
		d.want(d.do(1, "GET", "/v1/alpha", "", "X-Api-Key", value), 403, "")
	})
}

// data returns the current session of a browser, read on instance i.
func (d *deployment) data(c cookieSession, i int) map[string]any {
	return d.do(i, "GET", "/v1/account/session", "", "Cookie", c.cookie).data(d.t)
}

func TestForgedTokens(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deploy(t, b, nil, true, false)
		primary, _, _ := d.account("acct")
		tok, _ := d.startToken(0, primary)
		head, rest_, _ := strings.Cut(tok, ".")
		body, _, _ := strings.Cut(rest_, ".")
		claims, _ := base64.RawURLEncoding.DecodeString(body)
		enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
		sign := func(key []byte, signing string) string {
			m := hmac.New(sha256.New, key)
			m.Write([]byte(signing))
			return signing + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
		}
		longer := strings.Replace(string(claims), `"sub"`, `"pad":"`+strings.Repeat("x", 4000)+`","sub"`, 1)
		forged := map[string]string{
			"alg none":       enc(`{"alg":"none","typ":"JWT"}`) + "." + body + ".",
			"alg none, sig":  enc(`{"alg":"none","typ":"JWT"}`) + "." + body + "." + strings.Split(tok, ".")[2],
			"other secret":   sign([]byte("another-secret-another-secret-0123"), head+"."+body),
			"changed claims": head + "." + enc(strings.Replace(string(claims), `"sub":"acct"`, `"sub":"acct2"`, 1)) + "." + strings.Split(tok, ".")[2],
			"no binding":     sign([]byte("x"), head+"."+enc(strings.Replace(string(claims), `"kbd"`, `"nokbd"`, 1))),
			"oversized":      sign(secret, head+"."+enc(longer)),
			"not a JWT":      "abc.def",
		}
		for name, f := range forged {
			for _, path := range []string{"/v1/account/session", "/v1/account/whoami"} {
				r := d.do(1, "GET", path, "", "X-Jwt", f)
				if r.status != 401 {
					t.Errorf("%s at %s: got %d %q; want 401", name, path, r.status, r.body)
				}
				r = d.do(1, "GET", path, "", "Cookie", session.InsecureCookieName+"="+f)
				if r.status != 401 {
					t.Errorf("%s as a cookie at %s: got %d %q; want 401", name, path, r.status, r.body)
				}
			}
			// REST refuses a token of the wrong shape at its edge (a bare 403), and a
			// well-shaped forgery with 401: never a 5xx.
			if r := d.do(1, "GET", "/v1/alpha", "", "X-Jwt", f); r.status != 401 && r.status != 403 {
				t.Errorf("%s on REST: got %d %q; want 401 or the edge's 403", name, r.status, r.body)
			}
		}
	})
}

func TestLogin(t *testing.T) {
	login := session.LoginFunc(func(ctx context.Context, r *http.Request) (string, error) {
		switch r.Header.Get("X-Test-User") {
		case "alice":
			return "acct", nil
		case "mallory":
			return "", fmt.Errorf("%w: the password is wrong", session.ErrLoginRefused)
		case "ghost":
			return "no-such-account", nil
		}
		return "", errors.New("the user directory is down")
	})
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deploy(t, b, login, true, false)
		primary, _, _ := d.account("acct")
		r := d.do(0, "POST", "/v1/account/session", "", "X-Test-User", "alice")
		d.want(r, 201, `"account":"acct"`)
		cookies := (&http.Response{Header: r.header}).Cookies()
		if len(cookies) != 1 {
			t.Fatalf("a login answered cookies %v", r.header.Values("Set-Cookie"))
		}
		browser := cookieSession{cookie: cookies[0].Name + "=" + cookies[0].Value, csrf: r.data(t)["csrf_token"].(string)}
		// It acts as the primary key: every API, and the key's id.
		keyID := r.data(t)["key_id"].(string)
		d.want(d.do(1, "POST", "/v1/account/whoami", "", "Cookie", browser.cookie, session.CSRFHeader, browser.csrf), 200, "POST acct "+keyID)
		tok := cookies[0].Value
		d.want(d.do(1, "GET", "/v1/beta", "", "X-Jwt", tok), 200, "beta")
		// Rotating the primary key does not end it (the person did not use its
		// value); revoking does.
		if _, _, err := d.instances[0].mgr.RotateKey(t.Context(), keyID); err != nil {
			t.Fatal(err)
		}
		d.want(d.do(1, "GET", "/v1/alpha", "", "X-Jwt", tok), 200, "alpha")
		_ = primary

		d.want(d.do(0, "POST", "/v1/account/session", "", "X-Test-User", "mallory"), 401, "the password is wrong")
		d.want(d.do(0, "POST", "/v1/account/session", "", "X-Test-User", "broken"), 503, "cannot be checked")
		d.want(d.do(0, "POST", "/v1/account/session", "", "X-Test-User", "ghost"), 500, "cannot be used")

		page, err := d.audit.List(t.Context(), audit.Query{Account: "acct"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range page.Entries {
			found = found || e.Action == audit.SessionStart && e.Reason == "login" && e.Actor == keyID
		}
		if !found {
			t.Errorf("no session.start with reason login by %s in %+v", keyID, page.Entries)
		}
		if _, err := d.instances[0].mgr.RevokeKey(t.Context(), keyID); err != nil {
			t.Fatal(err)
		}
		d.want(d.do(1, "GET", "/v1/alpha", "", "X-Jwt", tok), 401, "revoked")
	})
}

// TestNoKeyValueLeaks starts sessions every way with a key in each place it may come
// in, and checks that the key's value (in either case) and its hash appear in no
// cookie, token, answer, audit entry or log line.
func TestNoKeyValueLeaks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deploy(t, b, nil, true, false)
		primary, _, subValue := d.account("acct")
		var seen []string
		for _, key := range []string{primary, subValue} {
			for _, r := range []reply{
				d.do(0, "POST", "/v1/account/session", `{"kind":"token"}`, "X-Api-Key", key),
				d.do(0, "POST", "/v1/account/session", "", "Authorization", "Bearer "+strings.ToUpper(key)),
				d.do(1, "POST", "/v1/account/session", `{"api_key":"`+key+`"}`),
			} {
				if r.status != 201 {
					t.Fatalf("start: %d %s", r.status, r.body)
				}
				seen = append(seen, r.body, strings.Join(r.header.Values("Set-Cookie"), "\n"))
				if tok, _ := r.data(t)["token"].(string); tok != "" {
					parts := strings.Split(tok, ".")
					claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
					seen = append(seen, string(claims))
					// Sign out, so that the end is logged and audited too.
					d.want(d.do(1, "DELETE", "/v1/account/session", "", "X-Jwt", tok), 200, "ended")
				}
			}
		}
		// A malformed key in the body is refused without echoing it.
		bad := strings.Replace(primary, "-", "_", 1)
		r := d.do(0, "POST", "/v1/account/session", `{"api_key":"`+bad+`"}`)
		d.want(r, 401, "api_key is not an API key")
		seen = append(seen, r.body)
		page, err := d.audit.List(t.Context(), audit.Query{Account: "acct"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			seen = append(seen, fmt.Sprintf("%+v", e))
		}
		d.logMu.Lock()
		seen = append(seen, d.logs.String())
		d.logMu.Unlock()
		all := strings.ToLower(strings.Join(seen, "\n"))
		for _, key := range []string{primary, subValue, bad} {
			h := auth.HashKey(key)
			for _, secret := range []string{strings.ToLower(key), h.String(), strings.ToLower(base64.RawURLEncoding.EncodeToString(h[:]))} {
				if strings.Contains(all, secret) {
					t.Errorf("a key's value or hash %q appears in a cookie, token, answer, audit entry or log", secret)
				}
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }
