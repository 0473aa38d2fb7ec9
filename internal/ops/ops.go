// Package ops is the operators' listener of the example servers (-ops-addr) and of
// tollgate-server (-ops-addr, package server): an HTTP
// server of its own, apart from the API's, so that the endpoints an orchestrator
// probes are never exposed where clients call, and are not held up by calls.
//
// It serves:
//
//	/healthz   liveness: 200 while the process serves (health.Checker.Live)
//	/readyz    readiness: 200 when every store answers, 503 naming the stores that
//	           do not (health.Checker.Ready)
//	/metrics   the Prometheus metrics of package metrics (metrics.Handler), GET only
//
// Its mux ([Mux]) is where any other operators' endpoint is mounted.
package ops

import (
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/health"
)

// Mux returns the mux of the operators' listener: /healthz and /readyz of ready, and
// GET /metrics of metrics (the scrape, metrics.Handler), unless it is nil.
func Mux(ready *health.Checker, metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", ready.Live())
	mux.Handle("/readyz", ready.Ready())
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

// NewServer returns the server of the operators' listener over h: its answers are
// small and quick, so every timeout is short, and it logs to logger at WARN. The host
// shuts it down after the API's server, so that the probes are answered while the
// calls in flight finish.
func NewServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// A Gate is the readiness of a process that starts, serves and stops: its operators'
// listener is up before the process is ready (so that an orchestrator's probes are
// answered while it opens its stores), and it says so. /readyz answers 503 with the
// reason ("starting", "shutting down") except while the process serves, when it
// answers as the readiness check of its stores does; /metrics answers 503 until the
// process gives its scrape. /healthz answers 200 throughout. A Gate is safe for
// concurrent use.
type Gate struct {
	st atomic.Pointer[gateState]
}

type gateState struct {
	reason  string       // why not ready; "" while serving
	ready   http.Handler // the stores' readiness, while serving
	metrics http.Handler // nil until Serving
}

// NewGate returns a gate that says the process is starting.
func NewGate() *Gate {
	g := &Gate{}
	g.st.Store(&gateState{reason: "starting"})
	return g
}

// Serving says the process serves: /readyz answers as ready does, /metrics serves
// metrics (if not nil).
func (g *Gate) Serving(ready *health.Checker, metrics http.Handler) {
	g.st.Store(&gateState{ready: ready.Ready(), metrics: metrics})
}

// Stopping says the process is shutting down: /readyz answers 503 from now on, so
// that a load balancer sends no new request, while /metrics still serves.
func (g *Gate) Stopping() {
	old := g.st.Load()
	g.st.Store(&gateState{reason: "shutting down", metrics: old.metrics})
}

// Mux returns the mux of the operators' listener behind the gate.
func (g *Gate) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			answer(w, http.StatusMethodNotAllowed, `{"status":"error","message":"use GET or HEAD"}`)
			return
		}
		answer(w, http.StatusOK, `{"status":"ok"}`)
	}))
	mux.Handle("/readyz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := g.st.Load()
		if st.reason == "" {
			st.ready.ServeHTTP(w, r)
			return
		}
		answer(w, http.StatusServiceUnavailable, `{"status":"unavailable","message":"not ready: `+st.reason+`"}`)
	}))
	mux.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := g.st.Load()
		if st.metrics == nil {
			answer(w, http.StatusServiceUnavailable, `{"status":"unavailable","message":"no metrics yet: starting"}`)
			return
		}
		st.metrics.ServeHTTP(w, r)
	}))
	return mux
}

func answer(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	io.WriteString(w, body+"\n")
}
