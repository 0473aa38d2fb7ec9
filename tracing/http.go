package tracing

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Handler returns next wrapped in the server span of each request: it continues the
// trace context the request carries (a W3C traceparent, read by
// [Options.Propagator]), so that a client's span is the parent of the request's, and
// the spans of the call the request makes are its children. Wrap the mux that every
// door is mounted on, so that each door's requests get the same treatment:
//
//	mux := http.NewServeMux()
//	doors.Mount(mux, svc, opts)
//	srv := &http.Server{Handler: tracer.Handler(mux)}
//
// The span follows OpenTelemetry's HTTP server conventions: named "{method}
// {http.route}" (the pattern of the http.ServeMux that routed the request, when one
// did: "POST /v1/graphql"), else "{method}"; with http.request.method, url.scheme,
// url.path, http.route, http.response.status_code, client.address, server.address,
// network.protocol.version and user_agent.original. Its status is Error for a 5xx
// answer, unset otherwise. No header and no query string is recorded (a query may
// hold an OAuth code or a cursor; the credentials are headers), and the account id of
// a management path is replaced by "{account_id}" unless [Options.AccountIDs].
//
// A host that already makes server spans (otelhttp) need not use Handler: the call's
// span is then a child of the host's.
func (t *Tracer) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if !t.w3c || len(r.Header["Traceparent"]) > 0 {
			// The W3C propagator alone (the default) finds nothing in a request with
			// no traceparent, and leaves its context as it is: only another
			// propagator, or a traceparent, is worth the call.
			ctx = t.prop.Extract(ctx, headerCarrier(r.Header))
		}
		method, known := httpMethod(r.Method)
		name := method
		if !known {
			name = "HTTP"
		}
		ctx, span := t.tracer.Start(ctx, name, serverOptions...)
		if !span.IsRecording() {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		defer span.End()
		span.SetAttributes(t.requestAttributes(r, method, known)...)
		sw := &statusWriter{ResponseWriter: w}
		r = r.WithContext(ctx)
		next.ServeHTTP(sw, r)
		if route := route(r.Pattern); route != "" {
			span.SetName(name + " " + route)
			span.SetAttributes(semconv.HTTPRoute(route))
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		if status >= 500 {
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
			span.SetStatus(codes.Error, "")
		}
	})
}

var serverOptions = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// requestAttributes are the HTTP server conventions' attributes of r, whose method is
// recorded as method.
func (t *Tracer) requestAttributes(r *http.Request, method string, known bool) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method))
	if !known {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(r.Method))
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs = append(attrs, semconv.URLScheme(scheme), semconv.URLPath(t.urlPath(r.URL.Path)))
	if addr := t.client(r); addr.IsValid() {
		attrs = append(attrs, semconv.ClientAddress(addr.String()))
	}
	if host := serverHost(r.Host); host != "" {
		attrs = append(attrs, semconv.ServerAddress(host))
	}
	if v := protocolVersion(r); v != "" {
		attrs = append(attrs, semconv.NetworkProtocolVersion(v))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	return attrs
}

// headerCarrier is propagation.HeaderCarrier, but reads the headers of the W3C
// propagators by their canonical names, which it need not compute (and allocate) for
// each request.
type headerCarrier http.Header

func (c headerCarrier) Get(key string) string {
	if v := c.Values(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c headerCarrier) Values(key string) []string {
	switch key {
	case "traceparent":
		key = "Traceparent"
	case "tracestate":
		key = "Tracestate"
	case "baggage":
		key = "Baggage"
	default:
		key = http.CanonicalHeaderKey(key)
	}
	return c[key]
}

func (c headerCarrier) Set(key, value string) { http.Header(c).Set(key, value) }

func (c headerCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }

// client returns the address r comes from.
func (t *Tracer) client(r *http.Request) netip.Addr {
	if t.clientAddr != nil {
		return t.clientAddr(r)
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// urlPath returns path as url.path records it: the segment after "accounts" (the
// account id of a management path) replaced by "{account_id}", unless account ids
// are recorded.
func (t *Tracer) urlPath(path string) string {
	if t.accountIDs || !strings.Contains(path, "/accounts/") {
		return path
	}
	segs := strings.Split(path, "/")
	for i := 1; i < len(segs); i++ {
		if segs[i-1] == "accounts" && segs[i] != "" {
			segs[i] = "{account_id}"
		}
	}
	return strings.Join(segs, "/")
}

// httpMethod returns method as http.request.method records it, and whether it is one
// of HTTP's: the others are "_OTHER", so that a client cannot make a span name of its
// own.
func httpMethod(method string) (string, bool) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method, true
	}
	return "_OTHER", false
}

// route returns the path of an http.ServeMux pattern ("GET example.com/v1/{api_id}"
// has "/v1/{api_id}"), or "".
func route(pattern string) string {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = strings.TrimLeft(pattern[i+1:], " \t")
	}
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return ""
}

// serverHost returns the host of a Host header, without its port.
func serverHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// protocolVersion returns the HTTP version of r ("1.1", "2").
func protocolVersion(r *http.Request) string {
	switch {
	case r.ProtoMajor == 1:
		return "1." + strconv.Itoa(r.ProtoMinor)
	case r.ProtoMajor > 1:
		return strconv.Itoa(r.ProtoMajor)
	}
	return ""
}

// statusWriter remembers the status of the answer it writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// FlushError flushes the answer, for the doors that stream (MCP's event streams),
// which flush through http.ResponseController.
func (w *statusWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError, for code that asks for an http.Flusher.
func (w *statusWriter) Flush() { w.FlushError() }

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
