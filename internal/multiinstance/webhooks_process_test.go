package multiinstance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	webhookclient "github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/webhook"
)

// The webhooks of a deployment whose instance is killed with kill -9 while it
// delivers: examples/distributed as processes, the outbox in PostgreSQL.

// hookPatience bounds every wait of the webhook tests: generous, since they never
// assert how long anything takes. The deliveries the killed instance had claimed are
// claimed again once their lease ends, a minute after the claim.
const hookPatience = 5 * time.Minute

// hookSchedule is the retry schedule of the instances: the first retry soon, and
// enough attempts over a few minutes that a delivery outlives the lease of one claimed
// by the killed instance and a loaded machine.
const hookSchedule = "250ms,500ms,1s,2s,4s,8s,15s,30s,60s,120s"

// hookTimeout is the timeout of an attempt: longer than the default (15s), so that the
// requests the receiver holds until enough are held are not given up on a loaded
// machine (a host that did not answer is held back, and gets one attempt at a time),
// and short enough that the lease stays a minute (the timeout and 10 s, at least a
// minute).
const hookTimeout = "45s"

// hookAllowance is the plan's allowance: 10 calls of hash spend it.
const hookAllowance = 10

// A hookRequest is one request the receiver got.
type hookRequest struct {
	account, id, typ string
	data             map[string]any
	// status is what it was answered; 0 for a request held until its sender went away.
	status int
	// after2xx says that an earlier request of its webhook-id was answered 2xx.
	after2xx bool
}

// hookReceiver is the webhook endpoint of every account, on loopback, at
// /hooks/{account}: it verifies every request with the Go client and the secret of
// the account's endpoint, and records it. It answers the first request of each
// webhook-id 500 and the others 204. While it holds, it keeps every request open until
// it lets them go (or their sender goes away), then answers them so.
type hookReceiver struct {
	t *testing.T
	*httptest.Server

	mu       sync.Mutex
	secrets  map[string]string // by account
	requests []hookRequest
	seen     map[string]int  // requests per webhook-id
	ok       map[string]bool // webhook-ids answered 2xx
	holding  bool
	release  chan struct{}
	held     int // requests held now
	cut      int // held requests whose sender went away before they were let go
	bad      int // requests that did not verify
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{t: t, secrets: map[string]string{}, seen: map[string]int{}, ok: map[string]bool{}, release: make(chan struct{})}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	t.Cleanup(rc.letGo) // before Close, which waits for the requests held
	return rc
}

func (rc *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	account, _ := strings.CutPrefix(r.URL.Path, "/hooks/")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	secret := rc.secrets[account]
	rc.mu.Unlock()
	ev, err := webhookclient.VerifyWebhook(secret, r.Header, body, time.Now(), 0)
	if err == nil && r.Header.Get("webhook-id") != ev.ID {
		err = fmt.Errorf("the webhook-id header %q is not the data's id %q", r.Header.Get("webhook-id"), ev.ID)
	}
	var data map[string]any
	if err == nil {
		err = ev.Decode(&data)
	}
	if err != nil {
		rc.mu.Lock()
		rc.bad++
		rc.mu.Unlock()
		rc.t.Errorf("a delivery to %s that does not verify: %v: %s", r.URL.Path, err, body)
		http.Error(w, "not signed by the service", http.StatusUnauthorized)
		return
	}
	req := hookRequest{account: account, id: ev.ID, typ: ev.Type, data: data}

	rc.mu.Lock()
	rc.seen[ev.ID]++
	first := rc.seen[ev.ID] == 1
	holding, release := rc.holding, rc.release
	if holding {
		rc.held++
	}
	rc.mu.Unlock()
	if holding {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		rc.mu.Lock()
		rc.held--
		if r.Context().Err() != nil {
			rc.cut++
			rc.requests = append(rc.requests, req)
			rc.mu.Unlock()
			return
		}
		rc.mu.Unlock()
	}
	req.status = http.StatusNoContent
	if first {
		req.status = http.StatusInternalServerError
	}
	rc.mu.Lock()
	req.after2xx = rc.ok[ev.ID]
	if req.status/100 == 2 {
		rc.ok[ev.ID] = true
	}
	rc.requests = append(rc.requests, req)
	rc.mu.Unlock()
	w.WriteHeader(req.status)
}

// hold makes the receiver keep the requests it gets open until letGo.
func (rc *hookReceiver) hold() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.holding = true
}

// letGo answers the requests held, and holds no more.
func (rc *hookReceiver) letGo() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.holding {
		rc.holding = false
		close(rc.release)
	}
}

// counts returns the requests held now and those cut off by their sender.
func (rc *hookReceiver) counts() (held, cut int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.held, rc.cut
}

// got returns the requests so far.
func (rc *hookReceiver) got() []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.requests)
}

// eventName names the event a message is about, the same for every message that
// tells it: its type, account and what makes it that event.
func eventName(account, typ string, data map[string]any) string {
	switch typ {
	case webhook.KeyCreated, webhook.KeyRotated:
		return fmt.Sprintf("%s %s %v", typ, account, data["key"])
	case webhook.CreditsLow:
		return fmt.Sprintf("%s %s %v", typ, account, data["threshold"])
	case webhook.CreditsExhausted:
		return fmt.Sprintf("%s %s", typ, account)
	case webhook.CreditsGranted:
		return fmt.Sprintf("%s %s %v", typ, account, data["reason"])
	}
	return fmt.Sprintf("%s %s %v", typ, account, data["id"]) // not expected: named by its message
}

// hookAPI sends a request with a JSON body (or none) to url, with the headers hdr
// (name, value pairs), and returns the status and the envelope's data.
func hookAPI(ctx context.Context, method, url, body string, hdr ...string) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var env struct {
		Data map[string]any `json:"data"`
	}
	json.Unmarshal(raw, &env)
	if env.Data == nil {
		env.Data = map[string]any{"raw": string(raw)}
	}
	return resp.StatusCode, env.Data, nil
}

// A hookAccount is an account of the test, its primary key and endpoint.
type hookAccount struct {
	id, key, endpoint string
	keys              int // sub-keys created so far, for their names
}

// hookRun is the run of TestWebhooksKilledInstance: the accounts and the events made.
type hookRun struct {
	t        *testing.T
	accounts []*hookAccount
	made     map[string]bool // the events made, by eventName
}

// must returns a function that takes what hookAPI returns, fails the test unless its
// status is want, and returns its data.
func (h *hookRun) must(what string, want int) func(int, map[string]any, error) map[string]any {
	return func(status int, data map[string]any, err error) map[string]any {
		h.t.Helper()
		if err != nil || status != want {
			h.t.Fatalf("%s: %d %v (%v), want %d", what, status, data, err, want)
		}
		return data
	}
}

// createKey creates a sub-key of a through the instance at url: key.created.
func (h *hookRun) createKey(url string, a *hookAccount) string {
	h.t.Helper()
	a.keys++
	d := h.must("create a sub-key", http.StatusCreated)(hookAPI(h.t.Context(), "POST", url+"/v1/account/keys",
		fmt.Sprintf(`{"name":"k%d"}`, a.keys), "X-Api-Key", a.key))
	key, _ := d["key"].(map[string]any)
	id, _ := key["id"].(string)
	h.made[eventName(a.id, webhook.KeyCreated, map[string]any{"key": id})] = true
	return id
}

// rotate rotates a's key id through the instance at url: key.rotated.
func (h *hookRun) rotate(url string, a *hookAccount, id string) {
	h.t.Helper()
	h.must("rotate a sub-key", http.StatusOK)(hookAPI(h.t.Context(), "POST", url+"/v1/account/keys/"+id+"/rotate", "", "X-Api-Key", a.key))
	h.made[eventName(a.id, webhook.KeyRotated, map[string]any{"key": id})] = true
}

// call makes the n-th call of hash of a's period through the instance at url: past
// the allowance it must be refused for its credits (credits.exhausted), unless
// credits were granted; the calls that bring the use to a threshold make credits.low.
func (h *hookRun) call(url string, a *hookAccount, n int, granted bool) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), http.MethodGet, url+"/v1/hash?text=hello", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case n <= hookAllowance || granted:
		if resp.StatusCode != http.StatusOK {
			h.t.Fatalf("call %d of %s: %s, want 200", n, a.id, resp.Status)
		}
		for _, threshold := range webhook.DefaultThresholds() {
			if n*100 == threshold*hookAllowance {
				h.made[eventName(a.id, webhook.CreditsLow, map[string]any{"threshold": float64(threshold)})] = true
			}
		}
	default:
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-Error-Code") != "credits_exhausted" {
			h.t.Fatalf("call %d of %s, past the allowance: %s %q, want 429 credits_exhausted", n, a.id, resp.Status, resp.Header.Get("X-Error-Code"))
		}
		h.made[eventName(a.id, webhook.CreditsExhausted, nil)] = true
	}
}

// grant grants a credits through the admin API of the instance at url:
// credits.granted.
func (h *hookRun) grant(url string, a *hookAccount, reason string) {
	h.t.Helper()
	h.must("grant credits", http.StatusOK)(hookAPI(h.t.Context(), "POST", url+"/admin/v1/accounts/"+a.id+"/credits",
		`{"amount": 5, "reason": "`+reason+`"}`, "Authorization", "Bearer "+adminToken))
	h.made[eventName(a.id, webhook.CreditsGranted, map[string]any{"reason": reason})] = true
}

// deliveries lists the deliveries of a's endpoint through the instance at url.
func (h *hookRun) deliveries(ctx context.Context, url string, a *hookAccount) ([]map[string]any, error) {
	status, d, err := hookAPI(ctx, "GET", url+"/v1/account/webhooks/"+a.endpoint+"/deliveries?limit=100", "", "X-Api-Key", a.key)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("list the deliveries: %d %v", status, d)
	}
	var out []map[string]any
	list, _ := d["deliveries"].([]any)
	for _, x := range list {
		out = append(out, x.(map[string]any))
	}
	if d["next"] != nil {
		return nil, errors.New("more than a page of deliveries")
	}
	return out, nil
}

// TestWebhooksKilledInstance runs two instances of examples/distributed as processes
// on PostgreSQL (the outbox) and Redis, and a receiver on loopback that verifies every
// request with webhookclient.VerifyWebhook and fails the first attempt of each message (500).
// Each of four accounts registers an endpoint (the account API, its primary key); then
// the instances make events of every account: keys created and rotated, calls that
// spend the allowance past 80, 90 and 100 percent and one past its last credit,
// credits granted. While the receiver holds more requests open than one instance
// attempts at once at one host (so both have deliveries in flight), one instance is killed with
// SIGKILL; the other keeps making events, then the killed one is restarted and makes
// more. Every event made arrives: each as one webhook-id (credits.low once per account
// and threshold, though both instances, and the restarted one, saw the thresholds
// reached), every request signed. A message received more than once was retried: its
// requests carry its webhook-id. It prints the events made, delivered, retried (more
// than one request) and duplicated (received again after a 2xx).
func TestWebhooksKilledInstance(t *testing.T) {
	testenv.SkipUnlessFull(t, "instances as processes, one killed with kill -9 while it delivers webhooks")
	dsn := testenv.Var(t, testenv.Postgres)
	redisAddr := testenv.Var(t, testenv.Redis)
	schema := testenv.PostgresSchema(t, dsn)
	prefix := testenv.RedisPrefix(t, testenv.RedisClient(t, redisAddr))
	rc := newHookReceiver(t) // first: its cleanup runs after the instances are killed
	h := &hookRun{t: t, made: map[string]bool{}}

	// Four accounts on a plan of 10 credits a period, no rate limit.
	fx := map[string]any{"plans": []any{map[string]any{"name": "meter", "credits": hookAllowance, "concurrency": 10}}}
	plansOnly := writeFixtures(t, fx)
	var accts []any
	for i := range 4 {
		a := &hookAccount{id: fmt.Sprintf("hooks-%d", i+1), key: auth.NewKeyValue()}
		h.accounts = append(h.accounts, a)
		accts = append(accts, map[string]any{"id": a.id, "plan": "meter",
			"keys": []any{map[string]any{"name": "primary", "value": a.key, "primary": true}}})
	}
	fx["accounts"] = accts
	common := []string{"-postgres", dsn, "-schema", schema, "-redis", redisAddr, "-prefix", prefix,
		"-admin-token", adminToken, "-allow-private-fetch", "-webhook-schedule", hookSchedule, "-webhook-timeout", hookTimeout}
	survivor := startProcess(t, append(common, "-fixtures", writeFixtures(t, fx))...)
	victim := startProcess(t, append(common, "-fixtures", plansOnly)...)
	a, b := survivor.url, victim.url

	// Each account's endpoint, registered through the survivor; every type.
	for _, acct := range h.accounts {
		d := h.must("register an endpoint", http.StatusCreated)(hookAPI(t.Context(), "POST", a+"/v1/account/webhooks",
			`{"url":"`+rc.URL+`/hooks/`+acct.id+`"}`, "X-Api-Key", acct.key))
		acct.endpoint, _ = d["id"].(string)
		rc.mu.Lock()
		rc.secrets[acct.id], _ = d["secret"].(string)
		rc.mu.Unlock()
	}

	// Both instances: a key created on each, the first rotated on the victim, and nine
	// calls taking turns (80 percent reached on the victim, 90 on the survivor).
	firstKeys := map[string][2]string{}
	for _, acct := range h.accounts {
		onA, onB := h.createKey(a, acct), h.createKey(b, acct)
		firstKeys[acct.id] = [2]string{onA, onB}
		h.rotate(b, acct, onA)
		for n := 1; n <= 9; n++ {
			h.call([]string{a, b}[(n+1)%2], acct, n, false)
		}
	}

	// The receiver holds every request; a burst of keys created on both instances
	// makes more deliveries due than one instance attempts at once at the receiver's
	// host (webhook.DefaultHostConcurrency, 4). Once more than that are held, both
	// have attempts in flight: the victim is killed.
	rc.hold()
	for _, acct := range h.accounts {
		for range 3 {
			h.createKey(a, acct)
			h.createKey(b, acct)
		}
	}
	waitFor(t, "more requests held than one instance attempts at once", func() error {
		if held, _ := rc.counts(); held <= webhook.DefaultHostConcurrency {
			return fmt.Errorf("%d held", held)
		}
		return nil
	})
	heldAtKill, _ := rc.counts()
	victim.kill()
	waitFor(t, "the killed instance's requests cut off", func() error {
		if _, cut := rc.counts(); cut == 0 {
			return errors.New("none cut off yet")
		}
		return nil
	})
	_, cutByKill := rc.counts()
	rc.letGo()

	// The survivor alone: the victim's first key rotated, the allowance spent to its
	// last credit (100 percent) and one call past it, credits granted.
	for _, acct := range h.accounts {
		h.rotate(a, acct, firstKeys[acct.id][1])
		h.call(a, acct, 10, false)
		h.call(a, acct, 11, false)
		h.grant(a, acct, "while one instance was down")
	}

	// The killed instance restarted: a key, a grant, and two calls on the grant (the
	// thresholds reached, seen anew by an instance that remembers none of them).
	restarted := startProcess(t, append(common, "-fixtures", plansOnly)...)
	b = restarted.url
	for _, acct := range h.accounts {
		h.createKey(b, acct)
		h.grant(b, acct, "after the restart")
		h.call(b, acct, 12, true)
		h.call(b, acct, 13, true)
	}

	// Every event arrives, answered 2xx, and every delivery is recorded delivered.
	perAccount := len(h.made) / len(h.accounts)
	waitFor(t, "every event delivered", func() error {
		delivered := map[string]bool{}
		for _, r := range rc.got() {
			if r.status/100 == 2 {
				delivered[eventName(r.account, r.typ, r.data)] = true
			}
		}
		for name := range h.made {
			if !delivered[name] {
				return fmt.Errorf("%s not delivered yet", name)
			}
		}
		for _, acct := range h.accounts {
			ds, err := h.deliveries(t.Context(), a, acct)
			if err != nil {
				return err
			}
			if len(ds) != perAccount || slices.ContainsFunc(ds, func(d map[string]any) bool { return d["state"] != "delivered" }) {
				return fmt.Errorf("%s: %d deliveries, not all delivered: %v", acct.id, len(ds), ds)
			}
		}
		return nil
	})

	// Each event made is one message, delivered under one webhook-id; no message the
	// events did not make.
	requests := rc.got()
	ids := map[string][]string{}     // the webhook-ids of each event
	statuses := map[string][]int{}   // the answers to each webhook-id, in order
	idAccount := map[string]string{} // the account of each webhook-id
	duplicated := map[string]bool{}  // webhook-ids received again after a 2xx
	for _, r := range requests {
		name := eventName(r.account, r.typ, r.data)
		if !slices.Contains(ids[name], r.id) {
			ids[name] = append(ids[name], r.id)
		}
		statuses[r.id] = append(statuses[r.id], r.status)
		idAccount[r.id] = r.account
		if r.after2xx {
			duplicated[r.id] = true
		}
	}
	for name := range h.made {
		if len(ids[name]) != 1 {
			t.Errorf("%s arrived as %d messages %v, want one webhook-id", name, len(ids[name]), ids[name])
		}
	}
	for name := range ids {
		if !h.made[name] {
			t.Errorf("the receiver got %s, an event the test did not make", name)
		}
	}
	// The store's deliveries are those messages: one per event and endpoint.
	attempts := 0
	for _, acct := range h.accounts {
		ds, err := h.deliveries(t.Context(), a, acct)
		if err != nil {
			t.Fatal(err)
		}
		var listed, received []string
		for _, d := range ds {
			id, _ := d["message_id"].(string)
			listed = append(listed, id)
			n, _ := d["attempts"].(float64)
			attempts += int(n)
		}
		for id, account := range idAccount {
			if account == acct.id {
				received = append(received, id)
			}
		}
		slices.Sort(listed)
		slices.Sort(received)
		if !slices.Equal(listed, received) {
			t.Errorf("%s: the store lists the messages %v, the receiver got %v", acct.id, listed, received)
		}
	}
	retried := 0
	for _, s := range statuses {
		if len(s) > 1 {
			retried++
		}
	}
	rc.mu.Lock()
	bad := rc.bad
	rc.mu.Unlock()
	if bad > 0 {
		t.Errorf("%d requests did not verify", bad)
	}
	t.Logf("events made %d (%d accounts); delivered %d; retried %d (more than one request); duplicated %d (received again after a 2xx); "+
		"%d requests, every one verified, %d attempts recorded by the store; %d requests held when the instance was killed, %d cut off by the kill",
		len(h.made), len(h.accounts), len(statuses), retried, len(duplicated), len(requests), attempts, heldAtKill, cutByKill)
}

// waitFor polls cond until it returns nil, and fails the test with its last error
// after hookPatience.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hookPatience)
	defer cancel()
	var last error
	if err := testenv.Wait(ctx, func() error { last = cond(); return last }); err != nil {
		t.Fatalf("waiting for %s: %v (%v)", what, last, err)
	}
}
