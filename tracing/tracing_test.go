package tracing_test

import (
	"context"
	"errors"
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

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/tracing"
)

const (
	key     = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
	account = "acme-traced"
	// The client's span, sent as a W3C traceparent.
	clientTrace = "0af7651916cd43dd8448eb211c80319c"
	clientSpan  = "b7ad6b7169203331"
	traceparent = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// pair is what the APIs "left" and "right" share: each waits, within a deadline, until
// both have started, so that a query of both passes only when they run in parallel.
type pair struct {
	started sync.WaitGroup
	both    chan struct{}
}

func newPair() *pair {
	p := &pair{both: make(chan struct{})}
	p.started.Add(2)
	go func() { p.started.Wait(); close(p.both) }()
	return p
}

// api returns an API that makes a span of its own, "work", under its context, and
// waits for its twin when p is not nil.
func api(id string, p *pair) catalog.API {
	return catalog.API{ID: id, Title: id, Method: http.MethodGet, Cost: 2,
		Params: []catalog.Param{{Name: "text", Type: catalog.String, Required: true}},
		Result: []catalog.Field{{Name: "text", Type: catalog.String}},
		Handler: catalog.HandlerFunc(func(ctx context.Context, req *catalog.Request) (any, error) {
			_, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("handler").Start(ctx, "work")
			defer span.End()
			if p != nil {
				p.started.Done()
				select {
				case <-p.both:
				case <-time.After(30 * time.Second):
					return nil, errors.New("the twin API never started: the query's APIs did not run in parallel")
				}
			}
			return map[string]any{"text": req.Params.String("text")}, nil
		})}
}

// server is a service on memory stores with the sample APIs and "left" and "right",
// its REST door and GraphQL gateway behind the tracer's middleware, and the spans it
// made.
type server struct {
	*httptest.Server
	spans  *tracetest.InMemoryExporter
	keyID  string
	detach func()
}

func newServer(t *testing.T, opts *tracing.Options) *server {
	t.Helper()
	return newServerOn(t, opts, func(*testing.T, *tracing.Tracer) tollgate.Stores {
		return tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
			Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	})
}

// newServerOn is newServer on the stores that stores makes, given the tracer.
func newServerOn(t *testing.T, opts *tracing.Options, stores func(*testing.T, *tracing.Tracer) tollgate.Stores) *server {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	o := tracing.Options{}
	if opts != nil {
		o = *opts
	}
	o.TracerProvider = tp
	var e *edge.Edge
	o.ClientAddr = func(r *http.Request) netip.Addr { return e.Addr(r) }
	tr := tracing.New(&o)

	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	p := newPair()
	for _, a := range []catalog.API{api("left", p), api("right", p), api("alone", nil)} {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 10})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tollgate.New(reg, stores(t, tr), plans, &tollgate.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	mux := http.NewServeMux()
	m, err := doors.Mount(mux, svc, &doors.Options{Doors: doors.REST | doors.GraphQL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	e = m.Edge
	_, k, _, err := m.Accounts.CreateAccount(t.Context(), accounts.Spec{ID: account, Plan: "pro", KeyValue: key})
	if err != nil {
		t.Fatal(err)
	}
	detach := tr.Attach(svc)
	t.Cleanup(detach)
	srv := httptest.NewServer(tr.Handler(mux))
	t.Cleanup(srv.Close)
	return &server{Server: srv, spans: exp, keyID: k.ID, detach: detach}
}

// do sends a request with the key and the client's traceparent, and returns the
// answer's status and body.
func (s *server) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Traceparent", traceparent)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tree returns the spans of the request just made, once its server span has ended
// (after the answer was written), and empties the exporter.
func (s *server) tree(t *testing.T) *tree {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := s.spans.GetSpans()
		for _, sp := range spans {
			if sp.SpanKind == trace.SpanKindServer && sp.Parent.IsRemote() {
				s.spans.Reset()
				return &tree{t: t, spans: spans}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request's server span never ended; spans: %v", names(spans))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type tree struct {
	t     *testing.T
	spans tracetest.SpanStubs
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.Name)
	}
	return out
}

// one returns the one span named name.
func (tr *tree) one(name string) tracetest.SpanStub {
	tr.t.Helper()
	got := tr.named(name)
	if len(got) != 1 {
		tr.t.Fatalf("%d spans named %q, want 1; spans: %v", len(got), name, names(tr.spans))
	}
	return got[0]
}

func (tr *tree) named(name string) []tracetest.SpanStub {
	var got []tracetest.SpanStub
	for _, sp := range tr.spans {
		if sp.Name == name {
			got = append(got, sp)
		}
	}
	return got
}

// children returns the names of the children of parent, sorted.
func (tr *tree) children(parent tracetest.SpanStub) []string {
	var out []string
	for _, sp := range tr.spans {
		if sp.Parent.SpanID() == parent.SpanContext.SpanID() {
			out = append(out, sp.Name)
		}
	}
	slices.Sort(out)
	return out
}

func attr(sp tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, a := range sp.Attributes {
		if a.Key == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

func (tr *tree) wantAttr(sp tracetest.SpanStub, k attribute.Key, want any) {
	tr.t.Helper()
	v, ok := attr(sp, k)
	if !ok {
		tr.t.Errorf("span %q has no %s; it has %v", sp.Name, k, sp.Attributes)
		return
	}
	if got := v.AsInterface(); got != want {
		tr.t.Errorf("span %q: %s = %v (%T), want %v (%T)", sp.Name, k, got, got, want, want)
	}
}

// wantRequest checks the server span of the request: the child of the client's
// span, with the route, and the parent of the call's span.
func (tr *tree) wantRequest(name, route string, status int) (server, call tracetest.SpanStub) {
	tr.t.Helper()
	server = tr.one(name)
	if server.SpanKind != trace.SpanKindServer || server.SpanContext.TraceID().String() != clientTrace ||
		!server.Parent.IsRemote() || server.Parent.SpanID().String() != clientSpan {
		tr.t.Errorf("server span: kind %v, trace %s, parent %s (remote %v); want a server span child of the client's %s-%s",
			server.SpanKind, server.SpanContext.TraceID(), server.Parent.SpanID(), server.Parent.IsRemote(), clientTrace, clientSpan)
	}
	tr.wantAttr(server, "http.route", route)
	tr.wantAttr(server, "http.response.status_code", int64(status))
	tr.wantAttr(server, "client.address", "127.0.0.1")
	call = tr.one("tollgate.call")
	if call.Parent.SpanID() != server.SpanContext.SpanID() || call.SpanKind != trace.SpanKindInternal {
		tr.t.Errorf("call span: parent %s, kind %v; want an internal child of the server span %s", call.Parent.SpanID(), call.SpanKind, server.SpanContext.SpanID())
	}
	for _, sp := range tr.spans {
		if sp.SpanContext.TraceID().String() != clientTrace {
			tr.t.Errorf("span %q is in trace %s, not the client's", sp.Name, sp.SpanContext.TraceID())
		}
	}
	return server, call
}

// wantNoSecrets checks that no span holds the key's value, nor the account's id,
// anywhere: its name, an attribute, an event, its status.
func (tr *tree) wantNoSecrets(noAccount bool) {
	tr.t.Helper()
	for _, sp := range tr.spans {
		texts := []string{sp.Name, sp.Status.Description}
		for _, a := range sp.Attributes {
			texts = append(texts, string(a.Key), a.Value.String())
		}
		for _, e := range sp.Events {
			texts = append(texts, e.Name)
			for _, a := range e.Attributes {
				texts = append(texts, string(a.Key), a.Value.String())
			}
		}
		for _, text := range texts {
			if strings.Contains(text, key) {
				tr.t.Errorf("span %q holds the key's value: %q", sp.Name, text)
			}
			if noAccount && strings.Contains(text, account) {
				tr.t.Errorf("span %q holds the account's id: %q", sp.Name, text)
			}
		}
	}
}

// TestREST: the span tree of a REST call continues the client's trace: the request's
// server span, the call's, and its authentication, admission, run and settlement;
// the handler's own span is a child of its run's.
func TestREST(t *testing.T) {
	s := newServer(t, nil)
	if status, body := s.do(t, http.MethodGet, "/v1/alone?text=hi", ""); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	tr := s.tree(t)
	_, call := tr.wantRequest("GET /v1/{api_id}", "/v1/{api_id}", 200)
	if got, want := tr.children(call), []string{"alone", "tollgate.admit", "tollgate.authenticate", "tollgate.settle"}; !slices.Equal(got, want) {
		t.Errorf("the call's children are %v, want %v", got, want)
	}
	tr.wantAttr(call, tracing.ChannelKey, "rest")
	tr.wantAttr(call, tracing.KeyIDKey, s.keyID)
	tr.wantAttr(call, tracing.PlanKey, "pro")
	tr.wantAttr(call, tracing.CreditsChargedKey, int64(2))
	tr.wantAttr(call, tracing.SettlementKey, "settled")
	run := tr.one("alone")
	tr.wantAttr(run, "rpc.method", "alone")
	tr.wantAttr(run, "rpc.response.status_code", "ok")
	if got := tr.children(run); !slices.Equal(got, []string{"work"}) {
		t.Errorf("the run's children are %v, want the handler's span", got)
	}
	if _, ok := attr(call, tracing.AccountIDKey); ok {
		t.Error("the call's span has the account id, which is an option")
	}
	for _, sp := range tr.spans {
		if sp.Status.Code == codes.Error {
			t.Errorf("span %q has status Error", sp.Name)
		}
	}
	tr.wantNoSecrets(true)
}

// TestGraphQL: a query of two APIs is one call whose two runs, in parallel, are both
// its children.
func TestGraphQL(t *testing.T) {
	s := newServer(t, nil)
	status, body := s.do(t, http.MethodPost, "/v1/graphql", `{"query":"{ left(text: \"a\") { text } right(text: \"b\") { text } }"}`)
	if status != http.StatusOK || strings.Contains(body, "errors") {
		t.Fatalf("status %d: %s", status, body)
	}
	tr := s.tree(t)
	_, call := tr.wantRequest("POST /v1/graphql", "/v1/graphql", 200)
	if got, want := tr.children(call), []string{"left", "right", "tollgate.admit", "tollgate.authenticate", "tollgate.settle"}; !slices.Equal(got, want) {
		t.Errorf("the call's children are %v, want %v", got, want)
	}
	tr.wantAttr(call, tracing.ChannelKey, "graphql")
	tr.wantAttr(call, tracing.CreditsChargedKey, int64(4))
	left, right := tr.one("left"), tr.one("right")
	// Each waited for the other to start: their spans overlap.
	if !left.StartTime.Before(right.EndTime) || !right.StartTime.Before(left.EndTime) {
		t.Errorf("the runs do not overlap: left %v-%v, right %v-%v", left.StartTime, left.EndTime, right.StartTime, right.EndTime)
	}
	for _, run := range []tracetest.SpanStub{left, right} {
		if got := tr.children(run); !slices.Equal(got, []string{"work"}) {
			t.Errorf("the children of %s are %v, want the handler's span", run.Name, got)
		}
	}
	tr.wantNoSecrets(true)
}

// TestBatch: a batch is one call with a run per valid item; an invalid item runs
// nothing.
func TestBatch(t *testing.T) {
	s := newServer(t, nil)
	status, body := s.do(t, http.MethodPost, "/v1/hash/batch", `{"items":[{"text":"a"},{"text":"b"},{"text":"c"},{"nope":1}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	tr := s.tree(t)
	_, call := tr.wantRequest("POST /v1/{api_id}/batch", "/v1/{api_id}/batch", 200)
	want := []string{"hash", "hash", "hash", "tollgate.admit", "tollgate.authenticate", "tollgate.settle"}
	if got := tr.children(call); !slices.Equal(got, want) {
		t.Errorf("the call's children are %v, want %v", got, want)
	}
	tr.wantAttr(call, tracing.ChannelKey, "batch")
	tr.wantAttr(call, tracing.CreditsChargedKey, int64(3))
	tr.wantNoSecrets(true)
}

// TestRefusals: a refused call's span says why (error.type, the code), with the
// status left unset for a refusal of the caller, as a 4xx answer's; the request's
// span has the answer's status.
func TestRefusals(t *testing.T) {
	s := newServer(t, nil)
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
		children   []string
	}{
		{"invalid input", "/v1/hash", 400, "invalid_input", []string{"tollgate.authenticate"}},
		{"unknown API", "/v1/nope", 404, "not_found", []string{"tollgate.authenticate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, body := s.do(t, http.MethodGet, tc.path, ""); status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			tr := s.tree(t)
			_, call := tr.wantRequest("GET /v1/{api_id}", "/v1/{api_id}", tc.status)
			tr.wantAttr(call, "error.type", tc.code)
			if call.Status.Code == codes.Error {
				t.Errorf("the call's status is Error for a refusal of the caller")
			}
			if got := tr.children(call); !slices.Equal(got, tc.children) {
				t.Errorf("the call's children are %v, want %v", got, tc.children)
			}
			tr.wantNoSecrets(true)
		})
	}
}

// TestAccountIDs: with the option, the call's span names the account.
func TestAccountIDs(t *testing.T) {
	s := newServer(t, &tracing.Options{AccountIDs: true})
	if status, body := s.do(t, http.MethodGet, "/v1/alone?text=hi", ""); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	tr := s.tree(t)
	tr.wantAttr(tr.one("tollgate.call"), tracing.AccountIDKey, account)
	tr.wantNoSecrets(false)
}

// TestDetach: once the tracer is detached from the service, a call makes no span but
// the request's.
func TestDetach(t *testing.T) {
	s := newServer(t, nil)
	s.detach()
	if status, body := s.do(t, http.MethodGet, "/v1/alone?text=hi", ""); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	tr := s.tree(t)
	if got := names(tr.spans); !slices.Equal(got, []string{"work", "GET /v1/{api_id}"}) {
		t.Errorf("spans %v, want the handler's and the request's", got)
	}
}
