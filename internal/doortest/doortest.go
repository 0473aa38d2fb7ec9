// Package doortest is the conformance suite of the front doors, in the spirit of
// store/storetest: every door (REST, batches, GraphQL, MCP, the account holders' API,
// the admin API) runs the same rows against its handler, each row a one-sentence
// contract of the HTTP edge that the door shares with the others (see package edge).
// A door describes itself in a [Door]: how to build it, a request it serves, a request
// it refuses, and how to read the code of a refusal in its protocol's shape.
package doortest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

// The suite's credentials and addresses.
const (
	// Key is the primary key of the account "acme", on a plan with a rate limit and
	// credits, so that every call's answer has credit and rate headers to carry.
	Key = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
	// OfficeKey is a sub-key of acme that may be used only from [Office].
	OfficeKey = "6fa459ea-ee8a-4ca4-894e-db77e160355e"
	// AdminToken is the admin token a door that takes one is built with.
	AdminToken = "an-admin-token-of-32-characters!"
	// Origin is the origin the suite's edge allows; [Elsewhere] is one it does not.
	Origin    = "https://app.example"
	Elsewhere = "https://elsewhere.example"
)

// Office is the network OfficeKey may be used from, and OfficeAddr an address in it,
// which the suite's requests name in X-Forwarded-For.
var (
	Office     = netip.MustParsePrefix("198.51.100.0/24")
	OfficeAddr = netip.MustParseAddr("198.51.100.7")
)

// Auth is how a door authenticates its callers.
type Auth uint8

const (
	// AuthKey: API keys and session tokens, read at the edge; a request without a
	// well-formed one is refused there.
	AuthKey Auth = iota
	// AuthAdminToken: the operator's admin token (package admin).
	AuthAdminToken
)

// A Request is what the suite sends to a door, before it adds the credential, the
// Origin and the forwarded address of a row.
type Request struct {
	Method, Path string
	// Body is the request body; ContentType its type.
	Body, ContentType string
	// Header holds more headers (Accept, say).
	Header http.Header
}

// A Door describes a front door to the suite.
type Door struct {
	// Name names the door in the rows' names.
	Name string
	// New builds the door on env's service and edge.
	New func(t *testing.T, env *Env) http.Handler
	// Auth is how the door authenticates.
	Auth Auth
	// Open, if set, prepares the requests of a caller before its rows run (an MCP
	// session's initialize), sending what it needs with send, which adds the caller's
	// headers; it returns the headers every later request of that caller carries.
	Open func(t *testing.T, send func(Request) (*http.Response, []byte)) http.Header
	// Call is a request the door serves with a success for [Key] (2xx).
	Call Request
	// Refused is a request the door refuses after authenticating [Key], and
	// RefusedCode the code of its refusal, as [Door.Code] reads it.
	Refused     Request
	RefusedCode string
	// ForbiddenCode is the code of the door's refusal of [OfficeKey] from outside
	// [Office], as [Door.Code] reads it.
	ForbiddenCode string
	// Code reads the code of a refusal in the door's documented shape, and fails if
	// the answer is not in that shape.
	Code func(status int, hdr http.Header, body []byte) (string, error)
	// Receipts: a successful call carries the credit and rate headers of its receipt.
	Receipts bool
	// CORS: the door answers cross-origin calls from the edge's allowed origins.
	CORS bool
	// NoCredential is the status of the door's answer to a request without any
	// credential: 0 for the edge's bare 403; else the status of the door's documented
	// answer (MCP's 401 with its OAuth challenge, say), in the door's shape.
	NoCredential int
	// Sessions: the door needs the service's session tokens (tollgate.Options.Sessions
	// and SessionStore).
	Sessions bool
	// MalformedKey is, in the same way, the status of the door's answer to a key that
	// is not shaped as one: 0 for the edge's bare 403.
	MalformedKey int
	// SuspendedCode is the code of the door's refusal of Call for [Key] once its
	// account is suspended, as [Door.Code] reads it, and SuspendedStatus its HTTP
	// status. Empty for a door that serves a suspended account's holder (the account
	// holders' API, sessions): its Call still succeeds.
	SuspendedCode   string
	SuspendedStatus int
}

// Env is what a door is built on: a service on memory stores with the sample catalog
// (package examples/apis) and the suite's accounts, its manager, and the edge of the
// row.
type Env struct {
	Service  *tollgate.Service
	Accounts *accounts.Manager
	Edge     *edge.Edge
	// EdgeOptions are the options Edge was made of, for a door that makes its own
	// (doors.Mount).
	EdgeOptions edge.Options
	// Changes records the actors of the account changes the service publishes.
	changes *actors
	// refusals records the codes of the refused calls the service publishes.
	refusals *refusals
}

// now is the suite's fixed clock: rate limits never refill during a row.
var now = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// newEnv builds the service (with session tokens if asked), its accounts and the edge
// of opts.
func newEnv(t *testing.T, opts edge.Options, sessions bool) *Env {
	t.Helper()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 600,
		Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 10})
	if err != nil {
		t.Fatal(err)
	}
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	so := &tollgate.Options{Now: testenv.NewClock(now).Now, Logger: slog.New(slog.DiscardHandler)}
	if sessions {
		if so.Sessions, err = auth.NewSessions([]byte(strings.Repeat("k", auth.MinSessionSecret))); err != nil {
			t.Fatal(err)
		}
		so.SessionStore = memory.NewSessionStore()
	}
	svc, err := tollgate.New(reg, stores, plans, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	env := &Env{Service: svc, changes: &actors{}, refusals: &refusals{}}
	svc.Events().Subscribe(env.changes, event.AccountCreated, event.KeyCreated, event.KeyRotated,
		event.KeyUpdated, event.KeyRevoked, event.CreditsAdjusted)
	svc.Events().Subscribe(env.refusals, event.CallRefused)
	if env.Accounts, err = accounts.New(svc, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Accounts.Close)
	if _, _, _, err := env.Accounts.CreateAccount(t.Context(), accounts.Spec{ID: "acme", Plan: "pro", KeyValue: Key}); err != nil {
		t.Fatal(err)
	}
	rs, err := auth.NewRestrictions(auth.RestrictionSpec{AllowedIPs: []string{Office.String()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Accounts.CreateKey(t.Context(), "acme", accounts.NewKey{Name: "office", Restrictions: rs, Value: OfficeKey}); err != nil {
		t.Fatal(err)
	}
	env.EdgeOptions = opts
	if env.Edge, err = edge.New(&opts); err != nil {
		t.Fatal(err)
	}
	return env
}

// actors records the addresses of the changes the service publishes.
type actors struct {
	mu    sync.Mutex
	addrs []netip.Addr
}

func (a *actors) Observe(_ context.Context, e event.Event) {
	if c, ok := e.(*event.Change); ok {
		a.mu.Lock()
		a.addrs = append(a.addrs, c.Actor.Addr)
		a.mu.Unlock()
	}
}

func (a *actors) last() (netip.Addr, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.addrs) == 0 {
		return netip.Addr{}, 0
	}
	return a.addrs[len(a.addrs)-1], len(a.addrs)
}

// refusals records the codes of the refused calls the service publishes.
type refusals struct {
	mu    sync.Mutex
	codes []string
}

func (r *refusals) Observe(_ context.Context, e event.Event) {
	if ref, ok := e.(*event.Refusal); ok {
		r.mu.Lock()
		r.codes = append(r.codes, ref.Code)
		r.mu.Unlock()
	}
}

func (r *refusals) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.codes)
}

// server is a door behind an httptest.Server, for one row.
type server struct {
	t    *testing.T
	door Door
	env  *Env
	srv  *httptest.Server
}

func start(t *testing.T, d Door, opts edge.Options) *server {
	t.Helper()
	env := newEnv(t, opts, d.Sessions)
	srv := httptest.NewServer(d.New(t, env))
	t.Cleanup(srv.Close)
	return &server{t: t, door: d, env: env, srv: srv}
}

// caller is one caller's headers: its credential, and what Open returned.
type caller struct {
	s   *server
	hdr http.Header
}

// as returns a caller with the given headers (name, value pairs) and no credential.
func (s *server) as(pairs ...string) *caller {
	c := &caller{s: s, hdr: http.Header{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		c.hdr.Set(pairs[i], pairs[i+1])
	}
	return c
}

// withKey returns the caller of key (with the admin token for a door that takes one)
// and the given headers, opened by the door's Open.
func (s *server) withKey(key string, pairs ...string) *caller {
	var c *caller
	if s.door.Auth == AuthAdminToken {
		c = s.as(append([]string{"Authorization", "Bearer " + AdminToken}, pairs...)...)
	} else {
		c = s.as(append([]string{wire.HeaderAPIKey, key}, pairs...)...)
	}
	if s.door.Open != nil {
		for k, v := range s.door.Open(s.t, func(r Request) (*http.Response, []byte) { return c.send(r) }) {
			c.hdr[k] = v
		}
	}
	return c
}

// send sends r with the caller's headers (r's own win, then pairs) and returns the
// answer with its body read.
func (c *caller) send(r Request, pairs ...string) (*http.Response, []byte) {
	t := c.s.t
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), r.Method, c.s.srv.URL+r.Path, strings.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		req.Header.Set(pairs[i], pairs[i+1])
	}
	resp, err := c.s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// NewEdge returns the edge of opts for a test, failing it if opts are invalid.
func NewEdge(t testing.TB, opts edge.Options) *edge.Edge {
	t.Helper()
	e, err := edge.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
