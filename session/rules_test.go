package session_test

// The rules of self-service and sessions that an attacker would probe: who reads the
// audit log, how many keys an account holder may create, how sessions are named in the
// log, what a failed sign-out leaves.

import (
	"net/http"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/redis"
)

func subKeysManage(o *accounts.Options) { o.SubKeysManageKeys = true }

// createKey creates a key through the self-service API with the credential header
// given, and returns its id and value.
func (d *deployment) createKey(i int, body string, hdr ...string) (id, value string) {
	d.t.Helper()
	r := d.do(i, "POST", "/v1/account/keys", body, append([]string{"Content-Type", "application/json"}, hdr...)...)
	if r.status != http.StatusCreated {
		d.t.Fatalf("creating %s: %d %s", body, r.status, r.body)
	}
	data := r.data(d.t)
	return data["key"].(map[string]any)["id"].(string), data["value"].(string)
}

// TestSubKeyCannotReadAuditLog checks that a sub-key may not read the audit log, which
// tells of every key of the account (their restrictions, the addresses they were
// changed from, the primary key's sessions), even with SubKeysManageKeys, while the
// primary key may.
func TestSubKeyCannotReadAuditLog(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, manage := range []func(*accounts.Options){nil, subKeysManage} {
			d := deployWith(t, b, nil, manage, false)
			primary, _, subValue := d.account("acct")
			d.createKey(0, `{"name":"ops","allowed_ips":["198.51.100.0/24"]}`, "X-Api-Key", primary)
			d.want(d.do(0, "GET", "/v1/account/audit", "", "X-Api-Key", subValue), 403, "cannot read the audit log")
			subToken, _ := d.startToken(0, subValue)
			d.want(d.do(0, "GET", "/v1/account/audit", "", "X-Jwt", subToken), 403, "cannot read the audit log")
			d.want(d.do(0, "GET", "/v1/account/audit", "", "X-Api-Key", primary), 200, "198.51.100.0/24")
		}
	})
}

// TestKeyNameLengthInCharacters checks that a key's name is bounded in characters, not
// bytes: 64 accented letters are a good name, 65 are not.
func TestKeyNameLengthInCharacters(t *testing.T) {
	d := deployWith(t, backends()[0], nil, nil, false)
	primary, _, _ := d.account("acct")
	name := strings.Repeat("é", 64)
	r := d.do(0, "POST", "/v1/account/keys", `{"name":"`+name+`"}`, "X-Api-Key", primary, "Content-Type", "application/json")
	d.want(r, 201, name)
	r = d.do(0, "POST", "/v1/account/keys", `{"name":"`+strings.Repeat("é", 65)+`"}`, "X-Api-Key", primary, "Content-Type", "application/json")
	d.want(r, 400, "64")
}

// TestSelfServiceKeyCap checks that an account holder may not grow the account's
// keys without bound: at accounts.Options.MaxOwnKeys keys, self-service creates no
// more (409, saying what to do); a revoked key counts until it is older than
// Options.RevokedKeyRetention, then no more, and the prune deletes it.
func TestSelfServiceKeyCap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := deployWith(t, b, nil, func(o *accounts.Options) {
			o.MaxOwnKeys, o.RevokedKeyRetention, o.KeyPruneInterval = 3, 24*time.Hour, -1
		}, false, true)
		primary, sub, _ := d.account("acct") // two live keys
		d.createKey(0, `{"name":"third"}`, "X-Api-Key", primary)
		body := `{"name":"fourth"}`
		d.want(d.do(0, "POST", "/v1/account/keys", body, "X-Api-Key", primary, "Content-Type", "application/json"), 409, "revoke keys")
		d.want(d.do(0, "POST", "/v1/account/keys/"+sub.ID+"/revoke", "", "X-Api-Key", primary), 200, sub.ID)
		d.want(d.do(0, "POST", "/v1/account/keys", body, "X-Api-Key", primary, "Content-Type", "application/json"), 409, "within the last day")
		d.clock.advance(24*time.Hour + time.Second)
		d.want(d.do(1, "GET", "/v1/account/keys", "", "X-Api-Key", primary), 200, sub.ID)
		d.createKey(1, body, "X-Api-Key", primary)
		if n, err := d.instances[0].mgr.PruneKeys(t.Context()); n != 1 || err != nil {
			t.Errorf("PruneKeys: %d, %v; want 1 (the revoked key), nil", n, err)
		}
		r := d.do(1, "GET", "/v1/account/keys", "", "X-Api-Key", primary)
		if d.want(r, 200, "fourth"); strings.Contains(r.body, sub.ID) {
			t.Errorf("the pruned key is still listed: %s", r.body)
		}
	})
}

// TestKeylessSessionActor checks that the audit log names a session that names no key
// (a token from Sessions.Issue) by its id, alike in the changes it made and in its
// sign-out, so that the log tells which session changed what.
func TestKeylessSessionActor(t *testing.T) {
	d := deployWith(t, backends()[0], nil, nil, false)
	d.account("acct")
	signer, _ := d.instances[0].svc.Sessions()
	tok, err := signer.Issue("acct", d.clock.now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	d.want(d.do(0, "POST", "/v1/account/keys", `{"name":"by session"}`, "X-Jwt", tok, "Content-Type", "application/json"), 201, "by session")
	d.want(d.do(0, "DELETE", "/v1/account/session", "", "X-Jwt", tok), 200, "ended")
	page, err := d.audit.List(t.Context(), audit.Query{Account: "acct"})
	if err != nil {
		t.Fatal(err)
	}
	actors := map[audit.Action]string{}
	for _, e := range page.Entries { // newest first
		if _, ok := actors[e.Action]; !ok {
			actors[e.Action] = e.Actor
		}
	}
	if actors[audit.KeyCreate] != actors[audit.SessionEnd] || !strings.HasPrefix(actors[audit.KeyCreate], "session:ses_") {
		t.Errorf("one session is named %q for the key it created and %q for its sign-out; want one name that identifies the session",
			actors[audit.KeyCreate], actors[audit.SessionEnd])
	}
}

// TestFailedSignOutKeepsCookie checks that a sign-out the service could not record
// (the store of ended sessions is down: 503) leaves the browser's cookie, so that the
// page may sign out again rather than leave the session alive behind a cleared cookie.
func TestFailedSignOutKeepsCookie(t *testing.T) {
	dead := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	down, err := redis.New(dead, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := backend{"memory with its ended sessions on a Redis that is down", func(t *testing.T) (tollgate.Stores, auth.SessionStore) {
		return tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
			Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, down
	}}
	d := deployWith(t, b, nil, nil, false)
	primary, _, _ := d.account("acct")
	browser := d.startCookie(0, primary)
	r := d.do(0, "DELETE", "/v1/account/session", "", "Cookie", browser.cookie, session.CSRFHeader, browser.csrf)
	if r.status < 500 {
		t.Fatalf("sign-out with the session store down: %d %s; want a 5xx", r.status, r.body)
	}
	if sc := r.header.Get("Set-Cookie"); sc != "" {
		t.Errorf("a sign-out that failed (%d %s) cleared the cookie: %q", r.status, r.body, sc)
	}
}
