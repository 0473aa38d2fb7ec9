package oauth_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/oauth"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// TestMain makes the certificate of httptest's TLS servers (the same for every one)
// the only trusted root, before anything reads the system roots, so that client
// metadata documents can be fetched over real TLS from a test server.
func TestMain(m *testing.M) {
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	ts.Close()
	dir, err := os.MkdirTemp("", "oauth-test-")
	if err != nil {
		panic(err)
	}
	file := filepath.Join(dir, "roots.pem")
	if err := os.WriteFile(file, block, 0o600); err != nil {
		panic(err)
	}
	os.Setenv("SSL_CERT_FILE", file)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// t0 is the instant every test clock starts at.
var t0 = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// harness is a service with accounts (managed by mgr), an authorization server on a
// recording memory store, and an httptest server that mounts it as a host would.
type harness struct {
	clock    *testenv.Clock
	svc      *tollgate.Service
	mgr      *accounts.Manager
	store    *recordingStore
	srv      *oauth.Server
	ts       *httptest.Server
	issuer   string
	resource string
	acct     account // an account on the pro plan, with its primary key
}

// account is a test account and one of its keys.
type account struct {
	ID, KeyID, Key string
}

// newHarness starts a harness. adjust, if given, changes the server's options.
func newHarness(t testing.TB, adjust ...func(*oauth.Options)) *harness {
	t.Helper()
	h := &harness{clock: testenv.NewClock(t0)}
	echo := catalog.API{ID: "echo", Title: "Echo", Description: "Echoes.", Method: http.MethodGet, Cost: 1,
		Handler: catalog.HandlerFunc(func(_ context.Context, r *catalog.Request) (any, error) { return map[string]any{}, nil })}
	reg, err := catalog.NewRegistry(echo)
	must(t, err)
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000})
	must(t, err)
	stores := tollgate.Stores{
		Keys:   memory.NewKeyStore(),
		Ledger: memory.NewLedger(nil),
		Rates:  memory.NewRateLimiter(),
		Slots:  memory.NewConcurrencyLimiter(),
	}
	h.svc, err = tollgate.New(reg, stores, plans, &tollgate.Options{Now: h.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	t.Cleanup(h.svc.Close)
	h.mgr, err = accounts.New(h.svc, &accounts.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	t.Cleanup(h.mgr.Close)
	h.acct = h.newAccount(t, auth.Restrictions{})

	var handler http.Handler
	h.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(h.ts.Close)
	h.issuer = h.ts.URL
	h.resource = h.issuer + "/v1/mcp"
	h.store = &recordingStore{Store: memory.NewOAuthStore()}
	opts := &oauth.Options{Issuer: h.issuer, Now: h.clock.Now, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range adjust {
		f(opts)
	}
	h.srv, err = oauth.New(h.store, oauth.ServiceKeys(h.svc), opts)
	must(t, err)
	mux := http.NewServeMux()
	mux.Handle("/", h.srv.Handler())
	mux.Handle(oauth.ResourceMetadataPath(h.resource), h.srv.ProtectedResourceMetadata(h.resource))
	handler = mux
	return h
}

// newAccount creates an account whose primary key has the given restrictions.
func (h *harness) newAccount(t testing.TB, r auth.Restrictions) account {
	t.Helper()
	a, _, _, err := h.mgr.CreateAccount(t.Context(), accounts.Spec{Plan: "pro"})
	must(t, err)
	k, value, err := h.mgr.CreateKey(t.Context(), a.ID, accounts.NewKey{Name: "mcp", Restrictions: r})
	must(t, err)
	return account{ID: a.ID, KeyID: k.ID, Key: value}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// register registers a client with the given redirect URIs and returns its id.
func (h *harness) register(t testing.TB, redirectURIs ...string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"client_name": "Test <Client>", "redirect_uris": redirectURIs})
	resp := h.post(t, "/oauth/register", "application/json", string(body))
	if resp.status != http.StatusCreated {
		t.Fatalf("register: %d %s", resp.status, resp.body)
	}
	return resp.json["client_id"].(string)
}

// answer is a response, read.
type answer struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func read(t testing.TB, resp *http.Response) answer {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &a.json); err != nil {
			t.Fatalf("decoding %q: %v", b, err)
		}
	}
	return a
}

// post sends a POST to the server.
func (h *harness) post(t testing.TB, path, contentType, body string) answer {
	t.Helper()
	resp, err := h.ts.Client().Post(h.issuer+path, contentType, strings.NewReader(body))
	must(t, err)
	return read(t, resp)
}

// token posts a token (or revocation) request.
func (h *harness) token(t testing.TB, path string, form url.Values) answer {
	t.Helper()
	return h.post(t, path, "application/x-www-form-urlencoded", form.Encode())
}

// request is an authorization request under test.
type request struct {
	clientID, redirectURI, resource, state string
	verifier                               string
}

// newRequest returns a request of clientID with a fresh PKCE verifier.
func (h *harness) newRequest(clientID, redirectURI string) request {
	return request{clientID: clientID, redirectURI: redirectURI, resource: h.resource, state: "st-" + randomString(8), verifier: randomString(64)}
}

// randomString returns n random base64url characters.
func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}

// challenge returns the S256 challenge of a verifier.
func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// query returns the request's authorization query.
func (q request) query() url.Values {
	v := url.Values{
		"response_type":         {"code"},
		"client_id":             {q.clientID},
		"redirect_uri":          {q.redirectURI},
		"code_challenge":        {challenge(q.verifier)},
		"code_challenge_method": {"S256"},
		"state":                 {q.state},
		"scope":                 {"mcp"},
	}
	if q.resource != "" {
		v.Set("resource", q.resource)
	}
	return v
}

// browser is a person's browser: it keeps cookies and does not follow redirects.
type browser struct {
	h      *harness
	client *http.Client
}

func (h *harness) browser(t testing.TB) *browser {
	jar, err := cookiejar.New(nil)
	must(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{h: h, client: c}
}

// open opens the authorization endpoint with a query.
func (b *browser) open(t testing.TB, v url.Values) answer {
	t.Helper()
	resp, err := b.client.Get(b.h.issuer + "/oauth/authorize?" + v.Encode())
	must(t, err)
	return read(t, resp)
}

// submit posts a consent form.
func (b *browser) submit(t testing.TB, form url.Values) answer {
	t.Helper()
	resp, err := b.client.PostForm(b.h.issuer+"/oauth/authorize", form)
	must(t, err)
	return read(t, resp)
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// formOf returns the hidden fields of a consent page.
func formOf(t testing.TB, page answer) url.Values {
	t.Helper()
	if page.status != http.StatusOK && page.status != http.StatusForbidden {
		t.Fatalf("consent page: %d %s", page.status, page.body)
	}
	form := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page.body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if form.Get("consent") == "" {
		t.Fatalf("the consent page has no consent field:\n%s", page.body)
	}
	return form
}

// approved returns form with the decision to approve with key.
func approved(form url.Values, key string) url.Values {
	f := url.Values{}
	for k, v := range form {
		f[k] = v
	}
	f.Set("action", "approve")
	if key != "" {
		f.Set("api_key", key)
	}
	return f
}

// redirected returns the query of the redirect of an answer, after checking that it
// goes to the request's redirect URI.
func redirected(t testing.TB, a answer, q request) url.Values {
	t.Helper()
	if a.status != http.StatusSeeOther {
		t.Fatalf("got %d, want a redirect (303); body:\n%s", a.status, a.body)
	}
	u, err := url.Parse(a.header.Get("Location"))
	must(t, err)
	if got := u.Scheme + "://" + u.Host + u.Path; got != q.redirectURI {
		t.Fatalf("redirected to %q, want %q", got, q.redirectURI)
	}
	return u.Query()
}

// authorize runs the browser part of the flow with the account's key and returns the
// code.
func (h *harness) authorize(t testing.TB, q request) string {
	t.Helper()
	b := h.browser(t)
	page := b.open(t, q.query())
	v := redirected(t, b.submit(t, approved(formOf(t, page), h.acct.Key)), q)
	if v.Get("state") != q.state || v.Get("iss") != h.issuer || v.Get("code") == "" {
		t.Fatalf("redirect query = %v, want code, state %q and iss %q", v, q.state, h.issuer)
	}
	return v.Get("code")
}

// exchange redeems a code.
func (h *harness) exchange(t testing.TB, q request, code string) answer {
	t.Helper()
	return h.token(t, "/oauth/token", url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {q.redirectURI},
		"code_verifier": {q.verifier}, "client_id": {q.clientID}, "resource": {q.resource},
	})
}

// tokens runs the whole flow and returns the access and refresh tokens.
func (h *harness) tokens(t testing.TB, q request) (access, refresh string) {
	t.Helper()
	a := h.exchange(t, q, h.authorize(t, q))
	if a.status != http.StatusOK {
		t.Fatalf("token: %d %s", a.status, a.body)
	}
	return a.json["access_token"].(string), a.json["refresh_token"].(string)
}

// refresh uses a refresh token.
func (h *harness) refresh(t testing.TB, clientID, refresh string) answer {
	t.Helper()
	return h.token(t, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {clientID}})
}

// wantOAuthError checks an OAuth error answer.
func wantOAuthError(t testing.TB, a answer, status int, code string) {
	t.Helper()
	if a.status != status || a.json["error"] != code {
		t.Errorf("got %d %s, want %d with error %q", a.status, a.body, status, code)
	}
	if a.status >= 400 && a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("error answer has Cache-Control %q, want no-store", a.header.Get("Cache-Control"))
	}
}

// wantValid checks that an access token is valid for the harness's resource.
func (h *harness) wantValid(t testing.TB, access string) oauth.Grant {
	t.Helper()
	g, err := h.srv.VerifyAccessToken(t.Context(), access, h.resource)
	if err != nil {
		t.Fatalf("VerifyAccessToken: %v", err)
	}
	return g
}

// wantInvalid checks that an access token is refused with ErrInvalidToken.
func (h *harness) wantInvalid(t testing.TB, access string) {
	t.Helper()
	if _, err := h.srv.VerifyAccessToken(t.Context(), access, h.resource); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Errorf("VerifyAccessToken = %v, want ErrInvalidToken", err)
	}
}

// recordingStore is an oauth.Store that records everything passed to it, so that tests
// can check that no code or token value ever reaches the store.
type recordingStore struct {
	oauth.Store
	mu   sync.Mutex
	seen strings.Builder
}

func (s *recordingStore) record(args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range args {
		fmt.Fprintf(&s.seen, "%+v\n", a)
		if v := reflect.ValueOf(a); v.Kind() == reflect.Array { // a Hash, in hex too
			fmt.Fprintf(&s.seen, "%x\n", a)
		}
	}
}

// contains reports whether s was ever passed to the store, in any argument.
func (s *recordingStore) contains(v string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(s.seen.String(), v)
}

func (s *recordingStore) CreateClient(ctx context.Context, c oauthstore.Client) error {
	s.record(c)
	return s.Store.CreateClient(ctx, c)
}

func (s *recordingStore) CreateApproval(ctx context.Context, a oauthstore.Approval, c oauthstore.Code) error {
	s.record(a, c)
	return s.Store.CreateApproval(ctx, a, c)
}

func (s *recordingStore) Code(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Code, oauthstore.Approval, error) {
	s.record(h)
	return s.Store.Code(ctx, h, now)
}

func (s *recordingStore) RedeemCode(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Code, oauthstore.Approval, error) {
	s.record(h)
	return s.Store.RedeemCode(ctx, h, now)
}

func (s *recordingStore) IssueTokens(ctx context.Context, id string, tokens []oauthstore.Token, now time.Time) error {
	s.record(id, tokens)
	return s.Store.IssueTokens(ctx, id, tokens, now)
}

func (s *recordingStore) Token(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Token, oauthstore.Approval, error) {
	s.record(h)
	return s.Store.Token(ctx, h, now)
}

func (s *recordingStore) RotateToken(ctx context.Context, old oauthstore.Hash, next []oauthstore.Token, now time.Time) (oauthstore.Approval, error) {
	s.record(old, next)
	return s.Store.RotateToken(ctx, old, next, now)
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// httpRequest returns a request without a body.
func httpRequest(method, target string) *http.Request {
	r, err := http.NewRequest(method, target, nil)
	if err != nil {
		panic(err)
	}
	return r
}
