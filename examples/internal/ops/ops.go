// Package ops is the operators' listener of the example servers (-ops-addr): an HTTP
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
	"log/slog"
	"net/http"
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

// Ping returns the store s of role as a store of the readiness check (health.New):
// s is every store of this module, or a decorator of one (package metrics), and every
// one answers health.Pinger. One that does not has no Pinger, which health.New
// refuses.
func Ping(role string, s any) health.Store {
	p, _ := s.(health.Pinger)
	return health.Store{Role: role, Pinger: p}
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
