// Package testserver runs the real REST front door, with the sample catalog
// (examples/apis) on in-memory stores, inside a test: the live server that the Go
// client, the command-line client and the generated client packages are tested
// against.
//
// Its accounts are those of the example server's fixtures (examples/server/testdata),
// the fixtures' account also holding a grant beside its allowance (so that its answers
// report granted credits), plus one account for each answer a client must map: a
// rate-limited one, one without credits, and a key that matches no account; and one
// without a rate limit, for runs of many calls. The clock is fixed, so rate limits never refill during a test, and
// URL-form fetches may reach loopback addresses (the option the REST tests use), so
// that the file server the package starts is reachable. Batches sent with an
// idempotency key keep their answers. A second address serves the same service with
// its answers stripped of X-Credits-Granted, as a service older than that header
// answers.
//
// The server counts what reaches it, so that a test can prove that a call that failed
// validation never touched the network.
package testserver

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

// The keys of the server's accounts.
const (
	// PrimaryKey is the primary key of the fixtures' account "acme" (plan pro, 1000
	// credits), which also holds a grant of [PrimaryGranted] credits: its answers report
	// them in X-Credits-Granted, since calls spend the allowance first.
	PrimaryKey = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
	// RestrictedKey is the fixtures' key "ci" of acme: hash only, over REST, from
	// 10.0.0.0/8. Tests call from loopback, so every call with it is a JSON 403.
	RestrictedKey = "6fa459ea-ee8a-4ca4-894e-db77e160355e"
	// RateLimitedKey belongs to an account whose plan allows one call a minute: its
	// second call is a 429 rate_limited with Retry-After.
	RateLimitedKey = "9b2f4c1e-3d5a-4e6b-8c7d-0e1f2a3b4c5d"
	// NoCreditsKey belongs to an account with no credits left: a paid call is a 429
	// credits_exhausted.
	NoCreditsKey = "c0ffee00-1234-4abc-9def-0123456789ab"
	// UnknownKey is well-formed but matches no account: a JSON 401.
	UnknownKey = "00000000-0000-4000-8000-000000000000"
	// BulkKey belongs to an account whose plan has no rate limit, with 100,000
	// credits: for runs of many calls (batches of 100 items), which the fixed clock
	// would otherwise hold to the pro plan's 600 calls.
	BulkKey = "b0b0b0b0-5a5a-4c4c-8d8d-0123456789ab"
)

// PrimaryGranted is the grant acme holds beside its allowance: it never lapses, and
// acme's calls in a test never spend it (they spend the allowance's 1000 credits
// first). The other accounts hold no grant.
const PrimaryGranted = 500

// PNGWidth and PNGHeight are the dimensions of [Server.PNG].
const (
	PNGWidth  = 7
	PNGHeight = 5
)

// now is the server's fixed clock: before the expiry of the restricted key, so that
// the key is refused for its address, not for its age.
var now = time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)

// A Server is the REST front door behind an httptest.Server, with a file server for
// URL-form calls. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL of the service (no trailing slash); APIs are at URL/v1/<id>.
	URL string
	// OlderURL is another base URL of the same service, whose answers lack the
	// X-Credits-Granted header, as those of a service older than that header do: for
	// the clients' reading of its absence. Its requests are counted as URL's.
	OlderURL string
	// FileURL is the address of a PNG image ([Server.PNG]) that URL-form calls can
	// pass.
	FileURL string
	// PNG is the image served at FileURL.
	PNG []byte
	// Service is the service behind the front door.
	Service *tollgate.Service
	// Accounts manages the service's accounts.
	Accounts *accounts.Manager

	mu        sync.Mutex
	apiCalls  int
	catalogs  int
	authModes []string
}

// Start starts a server for the test; it stops when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	plans, err := billing.NewPlans(
		billing.Plan{Name: "free", Credits: 50, RatePerMinute: 5, Concurrency: 1, GraphQLMaxAPIs: 1, BatchMaxItems: 10},
		billing.Plan{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 100},
		billing.Plan{Name: "trickle", Credits: 1000, RatePerMinute: 1, Concurrency: 1, GraphQLMaxAPIs: 1, BatchMaxItems: 10},
		billing.Plan{Name: "bulk", Credits: 100000, Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 100},
	)
	if err != nil {
		t.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys:   memory.NewKeyStore(),
		Ledger: memory.NewLedger(nil),
		Rates:  memory.NewRateLimiter(),
		Slots:  memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{
		Now:    testenv.NewClock(now).Now,
		Logger: slog.New(slog.DiscardHandler),
		Fetch:  tollgate.FetchOptions{AllowPrivate: true},
		// Batches sent with an idempotency key keep their answers, as on the example
		// server.
		Idempotency: &tollgate.IdempotencyOptions{Store: memory.NewIdempotencyStore(nil)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	createAccounts(t, mgr)
	h, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Service: svc, Accounts: mgr, PNG: PNG(t, PNGWidth, PNGHeight)}
	srv := httptest.NewServer(s.count(h))
	t.Cleanup(srv.Close)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(s.PNG)
	}))
	t.Cleanup(files.Close)
	older := httptest.NewServer(s.count(withoutGranted(h)))
	t.Cleanup(older.Close)
	s.URL, s.OlderURL, s.FileURL = srv.URL, older.URL, files.URL+"/image.png"
	return s
}

// withoutGranted removes X-Credits-Granted from next's answers.
func withoutGranted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(grantedRemover{w}, r)
	})
}

// grantedRemover removes X-Credits-Granted before the header is written.
type grantedRemover struct{ http.ResponseWriter }

func (w grantedRemover) WriteHeader(code int) {
	w.Header().Del(wire.HeaderCreditsGranted)
	w.ResponseWriter.WriteHeader(code)
}

func (w grantedRemover) Write(b []byte) (int, error) {
	w.Header().Del(wire.HeaderCreditsGranted) // a no-op once the header is written
	return w.ResponseWriter.Write(b)
}

// createAccounts creates the fixtures' account and keys and the accounts of the other
// answers.
func createAccounts(t testing.TB, mgr *accounts.Manager) {
	t.Helper()
	ctx := t.Context()
	thousand, zero := int64(1000), int64(0)
	if _, _, _, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acme", Plan: "pro", Credits: &thousand, KeyValue: PrimaryKey}); err != nil {
		t.Fatal(err)
	}
	expires := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rs, err := auth.NewRestrictions(auth.RestrictionSpec{
		APIs: []string{"hash"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.0.0.0/8"}, ExpiresAt: &expires,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := mgr.CreateKey(ctx, "acme", accounts.NewKey{Name: "ci", Restrictions: rs, Value: RestrictedKey}); err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.AdjustCredits(ctx, "acme", PrimaryGranted, "fixture: a grant beside the allowance", nil); err != nil {
		t.Fatal(err)
	}
	for _, a := range []accounts.Spec{
		{ID: "trickle", Plan: "trickle", KeyValue: RateLimitedKey},
		{ID: "broke", Plan: "pro", Credits: &zero, KeyValue: NoCreditsKey},
		{ID: "bulk", Plan: "bulk", KeyValue: BulkKey},
	} {
		if _, _, _, err := mgr.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
}

// count records each request before the front door sees it.
func (s *Server) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if r.URL.Path == "/v1/catalog" {
			s.catalogs++
		} else if strings.HasPrefix(r.URL.Path, "/v1/") {
			s.apiCalls++
			s.authModes = append(s.authModes, r.Header.Get("X-Auth-Mode"))
		}
		s.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// APICalls returns the number of requests to /v1/ paths other than /v1/catalog.
func (s *Server) APICalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apiCalls
}

// CatalogFetches returns the number of requests to /v1/catalog.
func (s *Server) CatalogFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.catalogs
}

// AuthModes returns the X-Auth-Mode header of every request counted by
// [Server.APICalls], in order.
func (s *Server) AuthModes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.authModes...)
}

// Balance returns the credit balance of an account ("acme", "trickle", "broke",
// "bulk").
func (s *Server) Balance(t testing.TB, account string) int64 {
	t.Helper()
	info, err := s.Accounts.Account(t.Context(), account)
	if err != nil {
		t.Fatal(err)
	}
	return info.Balance.Remaining
}

// ImageFile writes [Server.PNG] to a file in a temporary directory and returns its
// path.
func (s *Server) ImageFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.png")
	if err := os.WriteFile(p, s.PNG, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// PNG returns a w×h PNG image.
func PNG(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
