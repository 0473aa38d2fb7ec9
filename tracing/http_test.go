package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestURLPath(t *testing.T) {
	for _, tc := range []struct {
		path, want string
		accounts   bool
	}{
		{"/v1/hash", "/v1/hash", false},
		{"/admin/v1/accounts/acme", "/admin/v1/accounts/{account_id}", false},
		{"/admin/v1/accounts/acme/keys/key_1", "/admin/v1/accounts/{account_id}/keys/key_1", false},
		{"/admin/v1/accounts/", "/admin/v1/accounts/", false},
		{"/admin/v1/accounts", "/admin/v1/accounts", false},
		{"/admin/v1/accounts/acme", "/admin/v1/accounts/acme", true},
	} {
		tr := New(&Options{AccountIDs: tc.accounts})
		if got := tr.urlPath(tc.path); got != tc.want {
			t.Errorf("urlPath(%q) with AccountIDs %v = %q, want %q", tc.path, tc.accounts, got, tc.want)
		}
	}
}

func TestRoute(t *testing.T) {
	for pattern, want := range map[string]string{
		"":                        "",
		"/v1/":                    "/v1/",
		"GET /v1/{api_id}":        "/v1/{api_id}",
		"POST example.com/v1/{$}": "/v1/{$}",
		"example.com/":            "/",
		"GET  /spaced":            "/spaced",
	} {
		if got := route(pattern); got != want {
			t.Errorf("route(%q) = %q, want %q", pattern, got, want)
		}
	}
}

// handled serves one request through the tracer's middleware around h, and returns
// the request's span.
func handled(t *testing.T, opts *Options, req *http.Request, h http.HandlerFunc) tracetest.SpanStub {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.TracerProvider = tp
	New(&o).Handler(h).ServeHTTP(httptest.NewRecorder(), req)
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	return spans[0]
}

func attrs(sp tracetest.SpanStub) map[attribute.Key]any {
	m := map[attribute.Key]any{}
	for _, a := range sp.Attributes {
		m[a.Key] = a.Value.AsInterface()
	}
	return m
}

func TestHandler(t *testing.T) {
	t.Run("a failure of the service", func(t *testing.T) {
		sp := handled(t, nil, httptest.NewRequest(http.MethodPost, "/v1/x", nil), func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		a := attrs(sp)
		if sp.Name != "POST" || sp.Status.Code != codes.Error || a["http.response.status_code"] != int64(503) || a["error.type"] != "503" {
			t.Errorf("span %q status %v attributes %v", sp.Name, sp.Status, a)
		}
	})
	t.Run("a refusal of the caller", func(t *testing.T) {
		sp := handled(t, nil, httptest.NewRequest(http.MethodGet, "/v1/x", nil), func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		})
		if a := attrs(sp); sp.Status.Code != codes.Unset || a["http.response.status_code"] != int64(429) || a["error.type"] != nil {
			t.Errorf("span %q status %v attributes %v", sp.Name, sp.Status, a)
		}
	})
	t.Run("an unknown method", func(t *testing.T) {
		sp := handled(t, nil, httptest.NewRequest("FROB", "/v1/x", nil), func(http.ResponseWriter, *http.Request) {})
		a := attrs(sp)
		if sp.Name != "HTTP" || a["http.request.method"] != "_OTHER" || a["http.request.method_original"] != "FROB" || a["http.response.status_code"] != int64(200) {
			t.Errorf("span %q attributes %v", sp.Name, a)
		}
	})
	t.Run("a stream", func(t *testing.T) {
		var flushed error
		sp := handled(t, nil, httptest.NewRequest(http.MethodGet, "/v1/mcp", nil), func(w http.ResponseWriter, r *http.Request) {
			flushed = http.NewResponseController(w).Flush()
		})
		if flushed != nil || attrs(sp)["http.response.status_code"] != int64(200) {
			t.Errorf("flush: %v; attributes %v", flushed, attrs(sp))
		}
	})
	t.Run("the route", func(t *testing.T) {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/{api_id}", func(http.ResponseWriter, *http.Request) {})
		sp := handled(t, nil, httptest.NewRequest(http.MethodGet, "/v1/hash?text=secret", nil), mux.ServeHTTP)
		a := attrs(sp)
		if sp.Name != "GET /v1/{api_id}" || a["http.route"] != "/v1/{api_id}" || a["url.path"] != "/v1/hash" {
			t.Errorf("span %q attributes %v", sp.Name, a)
		}
		for k, v := range a {
			if s, ok := v.(string); ok && s != "" && (k == "url.query" || k == "url.full") {
				t.Errorf("the span records %s = %q", k, s)
			}
		}
	})
	t.Run("the parent", func(t *testing.T) {
		// The W3C propagator is skipped for a request with no traceparent (it finds
		// nothing there); with one, or with another propagator, it is asked.
		const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		for _, prop := range []propagation.TextMapPropagator{nil, propagation.TraceContext{}, &propagation.TraceContext{},
			propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})} {
			for _, header := range []string{"", parent} {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				if header != "" {
					req.Header.Set("Traceparent", header)
				}
				sp := handled(t, &Options{Propagator: prop}, req, func(http.ResponseWriter, *http.Request) {})
				got := sp.Parent.TraceID().String() + "-" + sp.Parent.SpanID().String()
				switch {
				case header == "" && (sp.Parent.IsValid() || !sp.SpanContext.IsValid()):
					t.Errorf("%T, no traceparent: parent %s, span %v", prop, got, sp.SpanContext)
				case header != "" && (got != "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331" || !sp.Parent.IsRemote() ||
					sp.SpanContext.TraceID() != sp.Parent.TraceID()):
					t.Errorf("%T, traceparent %s: parent %s, span %v", prop, header, got, sp.SpanContext)
				}
			}
		}
	})
	t.Run("baggage", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			prop propagation.TextMapPropagator
			want string
		}{
			{"not taken by default", nil, ""},
			{"taken by the host's propagator", propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}), "blue"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("Baggage", "color=blue")
				var got string
				handled(t, &Options{Propagator: tc.prop}, req, func(_ http.ResponseWriter, r *http.Request) {
					got = baggage.FromContext(r.Context()).Member("color").Value()
				})
				if got != tc.want {
					t.Errorf("baggage color = %q, want %q", got, tc.want)
				}
			})
		}
	})
}
