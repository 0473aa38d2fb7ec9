package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// TestBrowser drives the dashboard in Debian's Chromium with playwright-core
// (tools/npm/dashboard-e2e.mjs): sign in with a key; the overview's figures (the granted
// part of the balance among them) equal GET /v1/analytics; create a sub-key limited to one API, which calls it over REST and is
// refused another; copy its value with the copy button; rotate it, and see the old
// value refused by the next REST call; revoke it; a cross-site form post and a
// same-origin post without the CSRF token are refused; in the GraphQL explorer,
// completion suggests a field, the cost shown before a query runs is the sum of its
// APIs' catalog costs, the run shows its data and the credits charged, which is what
// the balance lost, and the part of the balance that grants hold, and queries over the plan's APIs per query, over the balance or
// naming a file API are shown refused before they run; the API reference shows every
// path of the OpenAPI document; axe-core finds no serious or critical accessibility
// violation on any page; no page breaks the Content-Security-Policy, and the explorer
// and the reference request nothing from another host. It writes a screenshot of every page at desktop (1280) and
// phone (390) width to $TOLLGATE_TEST_OUTPUT/dashboard if that is set, else to the
// test's t.TempDir() (removed after the test).
//
// On the APIs page it lists the catalog, opens an API, copies a snippet, calls it
// through the try-it form (the cost shown equals the balance's drop read from GET
// /v1/account, the granted part shown is the account's) and with an invalid value (a 400 naming the parameter, not charged),
// and sees the catalog as a key limited to one API sees it.
//
// On the Webhooks page it adds an endpoint at a receiver the test starts, sees its
// secret once, sends a test event and sees its delivery listed, then delivered (a
// deliverer runs; the receiver checks each delivery's signature with the endpoint's
// secret), resends it, disables and enables the endpoint, rotates its secret and
// deletes it after a confirmation.
//
// It needs chromium on PATH (scripts/test.sh installs Debian's) and the npm tools of
// tools/npm in $TOLLGATE_NODE_TOOLS; without them it skips, and under CI=true fails.
func TestBrowser(t *testing.T) {
	dir, node := testenv.Node22(t)
	for _, pkg := range []string{"playwright-core", "axe-core"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			testenv.Unavailable(t, "npm package %s is not installed in %s (scripts/test.sh installs it): %v", pkg, dir, err)
		}
	}
	browserPath, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Unavailable(t, "chromium is not on PATH (scripts/test.sh installs the Debian package): %v", err)
	}
	out := t.TempDir()
	if o := os.Getenv("TOLLGATE_TEST_OUTPUT"); o != "" {
		out = filepath.Join(o, "dashboard")
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	e := newEnv(t)
	// A grant beside the allowance, which the overview, the explorer and try-it show as
	// the part of the balance that carries over.
	if _, err := e.mgr.AdjustCredits(t.Context(), "acme", 250, "a grant for the pages to show", nil); err != nil {
		t.Fatal(err)
	}
	// Some usage, flushed, for the overview's figures and chart.
	for _, api := range []string{"alpha", "alpha", "beta"} {
		if got := e.call(t, api, e.key); got != http.StatusOK {
			t.Fatalf("call %s: %d", api, got)
		}
	}
	if err := e.rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Another site: a page whose form posts to the dashboard, without a CSRF token.
	// It is served on localhost while the dashboard is on 127.0.0.1: another site.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>Prizes</title><form method="post" action="%s/dashboard/rotate">`+
			`<input type="hidden" name="key_id" value="%s"><button>Win a prize</button></form></html>`,
			html.EscapeString(e.srv.URL), html.EscapeString(e.primaryID(t)))
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	// The test's hook that flushes the recorded usage, so that the usage page shows the
	// calls the script has just made (a host's recorder flushes on a timer).
	flush := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := e.rec.Flush(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(flush.Close)

	// The webhook receiver: it answers 204 and records each delivery, checking its
	// signature with the endpoint's secrets as the store holds them; and a deliverer of
	// the outbox.
	type received struct {
		id, typ, endpoint, agent string
		verified                 bool
	}
	var (
		mu   sync.Mutex
		hits []received
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, webhook.MaxBody+1))
		var m struct {
			Type string
			Data struct{ Endpoint string }
		}
		json.Unmarshal(body, &m)
		rec := received{id: r.Header.Get("webhook-id"), typ: m.Type, endpoint: m.Data.Endpoint, agent: r.UserAgent()}
		if ep, err := e.hookStore.Endpoint(r.Context(), m.Data.Endpoint); err == nil {
			for _, s := range []string{ep.Secret, ep.PreviousSecret} {
				rec.verified = rec.verified || s != "" && signature.Verify(s, r.Header, body, e.clock.Now(), 0) == nil
			}
		}
		mu.Lock()
		hits = append(hits, rec)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	deliverer, err := webhook.NewDeliverer(e.hookStore, &webhook.DelivererOptions{AllowPrivate: true, Poll: 50 * time.Millisecond,
		Now: e.clock.Now, Logger: e.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- deliverer.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			t.Errorf("the deliverer: %v", err)
		}
	})

	// A sub-key limited to hash, for the APIs page.
	_, scoped, err := e.mgr.CreateOwnKey(t.Context(), e.caller(), accounts.NewKey{Name: "hash only", Restrictions: mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"hash"}})})
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := json.Marshal(map[string]string{"base": e.srv.URL, "evil": evilURL, "key": e.key, "scoped": scoped, "flush": flush.URL,
		"hook": hook.URL + "/hooks", "chromium": browserPath, "out": out})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.json") // the key is in it: not in argv
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, filepath.Join(dir, "dashboard-e2e.mjs"), cfgPath)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	checks := 0
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	var createdID, endpointID string
	for sc.Scan() {
		var l struct {
			Check, Detail, Event, ID string
			OK                       bool
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("script output %q: %v", sc.Text(), err)
			continue
		}
		switch {
		case l.Event == "created":
			createdID = l.ID
		case l.Event == "endpoint":
			endpointID = l.ID
		case l.Check != "":
			checks++
			if !l.OK {
				t.Errorf("%s: failed (%s)", l.Check, l.Detail)
			}
		}
	}
	if runErr != nil {
		t.Fatalf("the browser script failed after %d checks: %v\n%s", checks, runErr, stderr.String())
	}
	t.Logf("%d checks passed in the browser; screenshots in %s", checks, out)
	if checks < 90 {
		t.Fatalf("the script ran only %d checks", checks)
	}

	// What the browser did, seen from the service: the sub-key is revoked, the primary
	// key survived the cross-site post, and no key value reached the log.
	page, err := e.mgr.OwnKeys(t.Context(), e.caller(), auth.KeyQuery{Limit: auth.MaxKeyPage})
	keys := page.Keys
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		switch {
		case k.ID == createdID && !k.Revoked():
			t.Errorf("the sub-key %s is not revoked", k.ID)
		case k.Primary && !k.RotatedAt.IsZero():
			t.Error("the cross-site post rotated the primary key")
		}
	}
	if createdID == "" {
		t.Error("the script named no created key")
	}
	if logs := e.logs.String(); strings.Contains(logs, e.key) || strings.Contains(logs, scoped) {
		t.Error("a key's value was logged")
	}
	// The endpoint the browser added received the test event twice (sent, then resent),
	// with the same webhook-id, signed with its secret; then it was deleted.
	mu.Lock()
	var tests []received
	for _, h := range hits {
		if h.endpoint == endpointID && h.typ == webhook.EndpointTest {
			tests = append(tests, h)
		}
	}
	mu.Unlock()
	switch {
	case endpointID == "":
		t.Error("the script named no endpoint")
	case len(tests) != 2 || tests[0].id != tests[1].id || tests[0].id == "":
		t.Errorf("the receiver got %+v, want the test event twice, with one webhook-id", tests)
	case !tests[0].verified || !tests[1].verified:
		t.Errorf("a delivery is not signed with the endpoint's secret: %+v", tests)
	case tests[0].agent != "tollgate-webhooks/1":
		t.Errorf("the deliveries' user-agent is %q", tests[0].agent)
	}
	if _, err := e.hookStore.Endpoint(t.Context(), endpointID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the endpoint the browser deleted: %v", err)
	}

	shots, _ := filepath.Glob(filepath.Join(out, "*.png"))
	if len(shots) < 30 {
		t.Errorf("%d screenshots in %s, want one per page and width", len(shots), out)
	}
}

// mustRestrictions returns the restrictions of spec.
func mustRestrictions(t *testing.T, spec auth.RestrictionSpec) auth.Restrictions {
	t.Helper()
	r, err := auth.NewRestrictions(spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
