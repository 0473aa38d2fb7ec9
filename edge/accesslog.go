package edge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
	"github.com/tollgate-dev/tollgate/wire"
)

// Handler returns h with the access log around it, for the requests of door ("rest",
// "graphql", "mcp", "account", "session", "dashboard", "admin", "oauth", ...). Without
// [Options.AccessLog] it returns h itself.
//
// Each request gets one line, at INFO, when h returns, with the message "request" and
// the attributes request_id, door, method, path, status, addr (the client's address),
// account, key_id (the key's id, never its value), apis, code (the error code, empty
// for a success), credits (what the request was charged), bytes (of the answer's
// body) and duration_ms. The path is logged without its query, and any run of 32 or
// more hexadecimal digits, or anything shaped as a UUID, in it is replaced with
// "[redacted]", so that key material a client put in a path is not kept. The request
// id is the client's X-Request-Id when it is sane (1 to wire.MaxRequestIDLen letters,
// digits, '-', '_', '.' or ':', and nothing that RedactPath would redact: a key sent in
// the wrong header is not logged), else one the edge makes; the answer carries it in
// X-Request-Id.
//
// A request that an outer Handler already logs is not logged twice: the inner door
// names it instead (the last name wins). The account, key, APIs, credits and code come
// from the service's call events (see [Edge.Observer]) and from the doors that
// authenticate a request without calling an API.
func (e *Edge) Handler(door string, h http.Handler) http.Handler {
	if e.access == nil {
		return h
	}
	return &logged{edge: e, door: door, next: h}
}

// Observer returns the observer of the service's calls that notes, in the access log's
// record of the request that made them, who called, the APIs, what they were charged
// and how they failed. Subscribe it to the service's CallFinished and CallRefused
// events (doors.Mount does): svc.Events().Subscribe(e.Observer(), event.CallFinished,
// event.CallRefused).
func (e *Edge) Observer() event.Observer { return event.ObserverFunc(observeCall) }

func observeCall(ctx context.Context, ev event.Event) {
	rec := reqlog.From(ctx)
	if rec == nil {
		return
	}
	switch ev := ev.(type) {
	case *event.Call:
		rec.Identify(ev.Account, ev.Key)
		apis := make([]string, 0, len(ev.APIs))
		code := ""
		for _, a := range ev.APIs {
			apis = append(apis, a.API)
			if code == "" {
				code = a.Code
			}
		}
		rec.Call(apis, ev.Charged, code)
	case *event.Refusal:
		rec.Identify(ev.Account, ev.Key)
		rec.Call(ev.APIs, 0, ev.Code)
	}
}

// AccessLogged reports whether the edge writes an access log.
func (e *Edge) AccessLogged() bool { return e.access != nil }

// logged is a door's handler with the access log around it.
type logged struct {
	edge *Edge
	door string
	next http.Handler
}

func (l *logged) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if rec := reqlog.From(ctx); rec != nil {
		rec.SetDoor(l.door)
		l.next.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	id := requestID(r.Header.Get(wire.HeaderRequestID))
	w.Header()[wire.HeaderRequestID] = []string{id}
	rec := &reqlog.Record{}
	rec.SetDoor(l.door)
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		s := rec.Snapshot()
		status := sw.status
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
			if v := recover(); v != nil {
				status = http.StatusInternalServerError
				defer panic(v)
			}
		}
		code := sw.code
		if code == "" {
			code = s.Code
		}
		apis := s.APIs
		if apis == nil {
			apis = []string{}
		}
		l.edge.access.LogAttrs(ctx, slog.LevelInfo, "request",
			slog.String("request_id", id),
			slog.String("door", s.Door),
			slog.String("method", r.Method),
			slog.String("path", RedactPath(r.URL.Path)),
			slog.Int("status", status),
			slog.String("addr", addrString(l.edge, r)),
			slog.String("account", s.Account),
			slog.String("key_id", s.Key),
			slog.Any("apis", apis),
			slog.String("code", code),
			slog.Int64("credits", s.Credits),
			slog.Int64("bytes", sw.bytes),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		)
	}()
	l.next.ServeHTTP(sw, r.WithContext(reqlog.With(ctx, rec)))
}

func addrString(e *Edge, r *http.Request) string {
	if a := e.Addr(r); a.IsValid() {
		return a.String()
	}
	return ""
}

// requestID returns the client's request id if it is sane, else a new one.
func requestID(v string) string {
	if len(v) > 0 && len(v) <= wire.MaxRequestIDLen {
		ok := true
		for i := 0; i < len(v) && ok; i++ {
			c := v[i]
			ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
		}
		// A UUID or a long run of hex digits may be a key sent in the wrong header: it
		// is not logged.
		if ok && !secretLike.MatchString(v) {
			return v
		}
	}
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// secretLike matches what may be key material in a path: a UUID (a key's form), or a
// run of 32 or more hexadecimal digits (a hash, a token).
var secretLike = regexp.MustCompile(`[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}|[0-9A-Fa-f]{32,}`)

// RedactPath returns path with what may be key material replaced with "[redacted]":
// every UUID and every run of 32 or more hexadecimal digits.
func RedactPath(path string) string {
	return secretLike.ReplaceAllLiteralString(path, "[redacted]")
}

// statusWriter is the ResponseWriter of a logged request: it keeps the status, the
// error code and the size of the answer.
type statusWriter struct {
	http.ResponseWriter
	status int
	code   string
	bytes  int64
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
		if v := w.Header()[wire.HeaderErrorCode]; len(v) > 0 {
			w.code = v[0]
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush sends what was written so far, for the event streams of MCP.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the ResponseWriter underneath, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
