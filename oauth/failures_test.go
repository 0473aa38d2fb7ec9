package oauth_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/oauth"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
)

// TestFailureLogLevels checks what the server logs when a request fails on its side:
// a store that cannot be read is the service's failure, logged at Error; a request
// whose client gave up (its context canceled, while a client metadata document was
// fetched or the store was read) is not, whatever it was waiting for.
func TestFailureLogLevels(t *testing.T) {
	docs := newDocumentServer(t, map[string]string{
		"/client.json": `{"client_id":"{url}","redirect_uris":["` + callback + `"]}`,
	})
	h := newHarness(t)
	client := h.register(t, callback)
	q := h.newRequest(client, callback)
	consent := q.query()
	consent.Set("action", "approve")
	consent.Set("consent", "000000000000.1.AAAA")
	secret := strings.Repeat("A", 43)
	tests := []struct {
		name, method, target, contentType, body string
		usesStore                               bool // fails when the store is down
	}{
		{"authorization request", "GET", "/oauth/authorize?" + q.query().Encode(), "", "", true},
		{"authorization request of a document client", "GET",
			"/oauth/authorize?" + h.newRequest(docs.URL+"/client.json", callback).query().Encode(), "", "", false},
		{"consent", "POST", "/oauth/authorize", "application/x-www-form-urlencoded", consent.Encode(), true},
		{"registration", "POST", "/oauth/register", "application/json", `{"redirect_uris":["` + callback + `"]}`, true},
		{"code exchange", "POST", "/oauth/token", "application/x-www-form-urlencoded", url.Values{
			"grant_type": {"authorization_code"}, "client_id": {client}, "code": {"tgac_" + secret},
			"redirect_uri": {callback}, "code_verifier": {q.verifier}}.Encode(), true},
		{"refresh", "POST", "/oauth/token", "application/x-www-form-urlencoded", url.Values{
			"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {"tgrt_" + secret}}.Encode(), true},
		{"revocation", "POST", "/oauth/revoke", "application/x-www-form-urlencoded", url.Values{
			"client_id": {client}, "token": {"tgat_" + secret}}.Encode(), true},
	}
	serve := func(t *testing.T, store oauth.Store, ctx context.Context, method, target, contentType, body string) (int, *levels) {
		t.Helper()
		logged := &levels{}
		srv, err := oauth.New(store, oauth.ServiceKeys(h.svc), &oauth.Options{
			Issuer: h.issuer, Now: h.clock.Now, Logger: slog.New(logged), Fetch: oauth.FetchOptions{AllowPrivate: true},
		})
		must(t, err)
		r := httptest.NewRequestWithContext(ctx, method, h.issuer+target, strings.NewReader(body))
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		return w.Code, logged
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.usesStore {
				status, logged := serve(t, downStore{h.store}, t.Context(), tt.method, tt.target, tt.contentType, tt.body)
				if status != http.StatusServiceUnavailable || !logged.has(slog.LevelError) {
					t.Errorf("store down: got %d and logged %v, want 503 and a record at Error", status, logged.all())
				}
			}
			canceled, cancel := context.WithCancel(t.Context())
			cancel()
			if _, logged := serve(t, h.store, canceled, tt.method, tt.target, tt.contentType, tt.body); logged.has(slog.LevelError) {
				t.Errorf("a request its client canceled was logged at Error: %v", logged.all())
			}
		})
	}
}

// errDown is the error of a downStore.
var errDown = errors.New("the store is down")

// downStore is a store that cannot be reached.
type downStore struct{ oauth.Store }

func (downStore) CreateClient(context.Context, oauthstore.Client) error { return errDown }
func (downStore) Client(context.Context, string) (oauthstore.Client, error) {
	return oauthstore.Client{}, errDown
}
func (downStore) CreateApproval(context.Context, oauthstore.Approval, oauthstore.Code) error {
	return errDown
}
func (downStore) Code(context.Context, oauthstore.Hash, time.Time) (oauthstore.Code, oauthstore.Approval, error) {
	return oauthstore.Code{}, oauthstore.Approval{}, errDown
}
func (downStore) Token(context.Context, oauthstore.Hash, time.Time) (oauthstore.Token, oauthstore.Approval, error) {
	return oauthstore.Token{}, oauthstore.Approval{}, errDown
}

// levels is a slog.Handler that records the level and message of every record.
type levels struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }

func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

func (l *levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levels) WithGroup(string) slog.Handler      { return l }

// has reports whether a record was logged at level or above.
func (l *levels) has(level slog.Level) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.Level >= level {
			return true
		}
	}
	return false
}

// all returns the records as "LEVEL message" lines.
func (l *levels) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		out = append(out, r.Level.String()+" "+r.Message)
	}
	return out
}

// TestReuseRevokesWhenTheClientLeaves checks that presenting a rotated refresh token
// revokes the connection even if the client leaves as soon as the server has read the
// token: the revocation is the server's decision, which the request's end must not cut
// short.
func TestReuseRevokesWhenTheClientLeaves(t *testing.T) {
	h := newHarness(t)
	q := h.newRequest(h.register(t, callback), callback)
	_, refresh1 := h.tokens(t, q)
	r := h.refresh(t, q.clientID, refresh1)
	if r.status != http.StatusOK {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	access2 := r.json["access_token"].(string)

	ctx, cancel := context.WithCancel(t.Context())
	srv, err := oauth.New(leavingStore{h.store, cancel}, oauth.ServiceKeys(h.svc), &oauth.Options{
		Issuer: h.issuer, Now: h.clock.Now, Logger: slog.New(slog.DiscardHandler),
	})
	must(t, err)
	body := url.Values{"grant_type": {"refresh_token"}, "client_id": {q.clientID}, "refresh_token": {refresh1}}.Encode()
	req := httptest.NewRequestWithContext(ctx, "POST", h.issuer+"/oauth/token", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	srv.Handler().ServeHTTP(httptest.NewRecorder(), req)
	h.wantInvalid(t, access2)
}

// leavingStore is a store whose reads of a token are the last thing the request's
// client waits for: it cancels the request's context once the token is read.
type leavingStore struct {
	oauth.Store
	cancel context.CancelFunc
}

func (s leavingStore) Token(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Token, oauthstore.Approval, error) {
	defer s.cancel()
	return s.Store.Token(ctx, h, now)
}
