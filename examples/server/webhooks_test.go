package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/webhook"
)

// The fixtures of the webhook tests: the account hooks on the plan tiny, whose
// allowance of 10 credits is spent in 10 calls of hash, with its primary key and a
// sub-key ci.
const (
	hooksPrimary  = "0b8f6a4e-64b8-4a53-9d2c-3f0f1c3cb3a1"
	hooksCI       = "5e0d8a3c-1f0b-4c58-8b7a-6f0f9a2d7e44"
	hooksFixtures = `{
  "plans": [{"name": "tiny", "credits": 10, "rate_per_minute": 600, "concurrency": 10}],
  "accounts": [{"id": "hooks", "plan": "tiny", "keys": [
    {"name": "primary", "value": "` + hooksPrimary + `", "primary": true},
    {"name": "ci", "value": "` + hooksCI + `"}]}]
}`
)

// patience bounds every wait for a delivery: generous, since the tests never assert
// how long anything takes.
const patience = 60 * time.Second

// eventually waits until cond holds, and fails the test if it has not within
// patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// delivery is one request a receiver verified: the message's id, type and data, the
// how-manieth request of its id it was (attempt, from 1) and the status it was
// answered.
type delivery struct {
	id, typ         string
	data            map[string]any
	attempt, status int
}

// receiver is a webhook endpoint on loopback that verifies every request with the Go
// client, with the secret its endpoint was given, and records it; answer says what to
// answer the n-th request (1 for the first), the attempt-th of its webhook-id.
type receiver struct {
	t *testing.T
	*httptest.Server
	answer func(n, attempt int) int

	mu       sync.Mutex
	secret   string
	got      []delivery
	requests int
	attempts map[string]int // requests per webhook-id
}

func newReceiver(t *testing.T, answer func(n, attempt int) int) *receiver {
	rc := &receiver{t: t, answer: answer, attempts: map[string]int{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		secret := rc.secret
		rc.requests++
		n := rc.requests
		rc.mu.Unlock()
		ev, err := client.VerifyWebhook(secret, r.Header, body, time.Now(), 0)
		if err != nil {
			t.Errorf("a delivery that does not verify: %v: %s %s", err, r.Header, body)
			http.Error(w, "not signed by the service", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("webhook-id") != ev.ID {
			t.Errorf("the webhook-id header %q is not the data's id %q", r.Header.Get("webhook-id"), ev.ID)
		}
		var data map[string]any
		if err := ev.Decode(&data); err != nil {
			t.Error(err)
		}
		rc.mu.Lock()
		rc.attempts[ev.ID]++
		attempt := rc.attempts[ev.ID]
		rc.mu.Unlock()
		status := answer(n, attempt)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{id: ev.ID, typ: ev.Type, data: data, attempt: attempt, status: status})
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// received returns the requests verified so far.
func (rc *receiver) received() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// register creates an endpoint at the receiver's URL for the account of key, through
// the account holders' API, for the given types (none: every type), and keeps its
// secret. It returns the endpoint's id.
func (rc *receiver) register(s *server, key string, types ...string) string {
	rc.t.Helper()
	body, _ := json.Marshal(map[string]any{"url": rc.URL + "/hooks", "events": types})
	r := s.call("POST", "/v1/account/webhooks", string(body), "x-api-key", key)
	if r.status != http.StatusCreated {
		rc.t.Fatalf("register a webhook endpoint: %d %s", r.status, r.body)
	}
	d := r.data(rc.t)
	secret, _ := d["secret"].(string)
	id, _ := d["id"].(string)
	if !strings.HasPrefix(secret, "whsec_") || !strings.HasPrefix(id, "ep_") {
		rc.t.Fatalf("the endpoint made: %s", r.body)
	}
	rc.mu.Lock()
	rc.secret = secret
	rc.mu.Unlock()
	return id
}

// deliveries returns the deliveries of the account's endpoint id, newest first, as
// GET /v1/account/webhooks/{id}/deliveries lists them.
func deliveries(s *server, key, id string) []map[string]any {
	s.t.Helper()
	r := s.call("GET", "/v1/account/webhooks/"+id+"/deliveries?limit=100", "", "x-api-key", key)
	if r.status != http.StatusOK {
		s.t.Fatalf("list the deliveries: %d %s", r.status, r.body)
	}
	var out []map[string]any
	for _, d := range r.data(s.t)["deliveries"].([]any) {
		out = append(out, d.(map[string]any))
	}
	return out
}

// TestAssembleWebhooks runs the webhooks of the example server black-box, over HTTP,
// twice: assembled in the test's process, and as the built command run as a process
// of its own. An account holder registers an endpoint on loopback
// (-allow-private-fetch), rotates a key, spends the account's allowance to its last
// credit and makes one call past it, and the operator grants credits. The receiver,
// which verifies every request with client.VerifyWebhook and fails the first attempt
// of each message (500), gets key.rotated, credits.low at 80, 90 and 100 percent,
// credits.exhausted and credits.granted, each as one message (its retry keeps its
// webhook-id), delivered by its second attempt and never again. A second endpoint,
// for credits.granted only, fails its first two attempts: its deliveries list shows
// them, and the third attempt delivers the message with the same webhook-id. The retry
// schedule is shortened for the test (-webhook-schedule), and an attempt's timeout
// made longer than the test holds one (-webhook-timeout).
func TestAssembleWebhooks(t *testing.T) {
	for _, how := range []string{"in process", "built command"} {
		t.Run(how, func(t *testing.T) {
			fixtures := filepath.Join(t.TempDir(), "hooks.json")
			if err := os.WriteFile(fixtures, []byte(hooksFixtures), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"-fixtures", fixtures, "-admin-token", testAdminToken, "-allow-private-fetch",
				"-webhook-schedule", "50ms,50ms,50ms", "-webhook-timeout", (2 * patience).String()}
			if how == "in process" {
				assembleWebhooks(t, start(t, args...))
			} else {
				assembleWebhooks(t, startBuilt(t, args...))
			}
		})
	}
}

// startBuilt builds examples/server into the test's temporary directory and runs it
// on a port of loopback the system picks, with args; it returns once it listens. It
// is stopped (SIGTERM, then SIGKILL after a while) when the test ends.
func startBuilt(t *testing.T, args ...string) *server {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/tollgate-dev/tollgate/examples/server").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/server: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	logs := &syncBuffer{}
	cmd.Stderr = logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(patience):
			cmd.Process.Kill()
			<-done
		}
	})
	listening := make(chan string, 1)
	var printed syncBuffer
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(&printed, sc.Text())
			if url, ok := strings.CutPrefix(sc.Text(), "Listening on "); ok {
				listening <- url
			}
		}
	}()
	select {
	case url := <-listening:
		return &server{t: t, url: url, client: &http.Client{}, stdout: printed.String(), logs: logs}
	case <-done:
		t.Fatalf("the server ended before it listened:\n%s", logs.String())
	case <-time.After(patience):
		t.Fatalf("the server does not listen after %s:\n%s", patience, logs.String())
	}
	return nil
}

// assembleWebhooks is TestAssembleWebhooks on the server s.
func assembleWebhooks(t *testing.T, s *server) {
	primary := []string{"x-api-key", hooksPrimary}

	// The receiver fails the first attempt of every message.
	rc := newReceiver(t, func(_, attempt int) int {
		if attempt == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	endpoint := rc.register(s, hooksPrimary)
	// The listing masks the secret; a sub-key may not manage endpoints.
	if r := s.call("GET", "/v1/account/webhooks", "", primary...); r.status != http.StatusOK ||
		strings.Contains(string(r.body), rc.secret) || !strings.Contains(string(r.body), endpoint) {
		t.Errorf("the listing of endpoints: %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/account/webhooks", "", "x-api-key", hooksCI); r.status != http.StatusForbidden {
		t.Errorf("the listing with a sub-key: %d %s, want 403", r.status, r.body)
	}

	// The flaky endpoint answers 500 twice, then holds its third attempt until the
	// test has read the deliveries list, then takes it.
	release := make(chan struct{})
	var released sync.Once
	flaky := newReceiver(t, func(n, _ int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		<-release
		return http.StatusOK
	})
	t.Cleanup(func() { released.Do(func() { close(release) }) }) // before the receiver's Close
	flakyEndpoint := flaky.register(s, hooksPrimary, webhook.CreditsGranted)

	// Rotate the sub-key, with the primary key.
	var ciID string
	for _, k := range s.call("GET", "/v1/account/keys", "", primary...).data(t)["keys"].([]any) {
		if k := k.(map[string]any); k["name"] == "ci" {
			ciID, _ = k["id"].(string)
		}
	}
	if r := s.call("POST", "/v1/account/keys/"+ciID+"/rotate", "", primary...); r.status != http.StatusOK {
		t.Fatalf("rotate the sub-key %q: %d %s", ciID, r.status, r.body)
	}

	// Spend the allowance to its last credit, then one call past it.
	for i := 1; i <= 10; i++ {
		r := s.call("GET", "/v1/hash?text=hello", "", primary...)
		if r.status != http.StatusOK || r.header.Get("X-Credits-Remaining") != fmt.Sprint(10-i) {
			t.Fatalf("call %d: %d, remaining %q: %s", i, r.status, r.header.Get("X-Credits-Remaining"), r.body)
		}
	}
	if r := s.call("GET", "/v1/hash?text=hello", "", primary...); r.status != http.StatusTooManyRequests || r.header.Get("X-Error-Code") != "credits_exhausted" {
		t.Fatalf("the call past the last credit: %d %q: %s", r.status, r.header.Get("X-Error-Code"), r.body)
	}

	// The operator grants credits.
	if r := s.call("POST", "/admin/v1/accounts/hooks/credits", `{"amount": 5, "reason": "top-up"}`,
		"Authorization", "Bearer "+testAdminToken); r.status != http.StatusOK {
		t.Fatalf("grant credits: %d %s", r.status, r.body)
	}

	// The receiver gets each event once: one webhook-id per event.
	want := []string{"credits.exhausted", "credits.granted", "credits.low 100", "credits.low 80", "credits.low 90", "key.rotated"}
	events := func() map[string][]delivery { // by event (type, and threshold), the distinct messages
		byEvent := map[string][]delivery{}
		for _, d := range rc.received() {
			name := d.typ
			if d.typ == webhook.CreditsLow {
				name = fmt.Sprintf("%s %v", d.typ, d.data["threshold"])
			}
			if !slices.ContainsFunc(byEvent[name], func(x delivery) bool { return x.id == d.id }) {
				byEvent[name] = append(byEvent[name], d)
			}
		}
		return byEvent
	}
	eventually(t, "the events delivered", func() bool { return len(events()) == len(want) })
	byEvent := events()
	var names []string
	for name, ds := range byEvent {
		names = append(names, name)
		if len(ds) != 1 {
			t.Errorf("%s was sent as %d messages, want 1", name, len(ds))
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("the receiver got %v, want %v", names, want)
	}
	check := func(name string, fields map[string]any) {
		t.Helper()
		ds := byEvent[name]
		if len(ds) == 0 {
			return
		}
		for k, v := range fields {
			if got := ds[0].data[k]; got != v {
				t.Errorf("%s: data.%s = %v, want %v (data %v)", name, k, got, v, ds[0].data)
			}
		}
	}
	check("key.rotated", map[string]any{"account": "hooks", "key": ciID})
	check("credits.low 80", map[string]any{"account": "hooks", "allowance": 10.0, "used": 8.0, "remaining": 2.0})
	check("credits.low 90", map[string]any{"used": 9.0, "remaining": 1.0})
	check("credits.low 100", map[string]any{"used": 10.0, "remaining": 0.0})
	check("credits.exhausted", map[string]any{"account": "hooks", "remaining": 0.0})
	check("credits.granted", map[string]any{"account": "hooks", "actor": "operator", "credits": 5.0, "reason": "top-up"})

	// The deliveries list holds those messages and no other, each delivered.
	eventually(t, "every delivery recorded delivered", func() bool {
		ds := deliveries(s, hooksPrimary, endpoint)
		return len(ds) == len(want) && !slices.ContainsFunc(ds, func(d map[string]any) bool { return d["state"] != "delivered" })
	})
	// Each message was attempted twice, as the store recorded it and the receiver saw it:
	// its first attempt answered 500, its retry, with the same webhook-id, 204; none came
	// again after the 2xx.
	for _, d := range deliveries(s, hooksPrimary, endpoint) {
		if d["attempts"] != 2.0 {
			t.Errorf("the delivery of %v %v: %v attempts, want 2 (the first failed)", d["type"], d["message_id"], d["attempts"])
		}
	}
	requests, retried, duplicated := 0, 0, 0
	seen := map[string][]int{} // the statuses answered to each webhook-id, in order
	for _, d := range rc.received() {
		requests++
		seen[d.id] = append(seen[d.id], d.status)
	}
	for id, statuses := range seen {
		if len(statuses) > 1 {
			retried++
		}
		if i := slices.Index(statuses, http.StatusNoContent); i >= 0 && i < len(statuses)-1 {
			duplicated++
		}
		if !slices.Equal(statuses, []int{http.StatusInternalServerError, http.StatusNoContent}) {
			t.Errorf("the requests of %s were answered %v, want [500 204]: a retry after the failed attempt, and none after the success", id, statuses)
		}
	}
	t.Logf("events made %d, messages received %d in %d requests, retried %d, duplicated after a 2xx %d",
		len(want), len(seen), requests, retried, duplicated)

	// The flaky endpoint: two attempts failed and recorded, the message pending.
	var pending map[string]any
	eventually(t, "two failed attempts recorded", func() bool {
		ds := deliveries(s, hooksPrimary, flakyEndpoint)
		if len(ds) == 1 && ds[0]["attempts"] == 2.0 {
			pending = ds[0]
		}
		return pending != nil
	})
	last, _ := pending["last_attempt"].(map[string]any)
	if pending["state"] != "pending" || pending["type"] != webhook.CreditsGranted || last["status"] != 500.0 || last["error"] == nil {
		t.Errorf("the delivery after two failed attempts: %v", pending)
	}
	released.Do(func() { close(release) })
	eventually(t, "the flaky endpoint's third attempt delivered", func() bool {
		ds := deliveries(s, hooksPrimary, flakyEndpoint)
		return len(ds) == 1 && ds[0]["state"] == "delivered"
	})
	ds := deliveries(s, hooksPrimary, flakyEndpoint)
	granted := byEvent["credits.granted"]
	if ds[0]["attempts"] != 3.0 || len(granted) == 0 || ds[0]["message_id"] != granted[0].id {
		t.Errorf("the flaky endpoint's delivery: %v; want 3 attempts of the credits.granted message", ds[0])
	}
	got := flaky.received()
	if len(got) != 3 {
		t.Fatalf("the flaky endpoint got %d requests, want 3: %v", len(got), got)
	}
	for _, d := range got {
		if d.typ != webhook.CreditsGranted || len(granted) == 0 || d.id != granted[0].id {
			t.Errorf("the flaky endpoint got %s %s; want every attempt to carry the credits.granted message's webhook-id", d.typ, d.id)
		}
	}
	s.noKeyInLogs(hooksPrimary, hooksCI)
	if strings.Contains(s.logs.String(), rc.secret) || strings.Contains(s.logs.String(), flaky.secret) {
		t.Error("the logs hold a webhook secret")
	}
}
