// Package outage words the answer to a request that a store failed: what the caller
// is told, and how loudly it is logged.
package outage

import (
	"context"
	"errors"
	"log/slog"

	"github.com/tollgate-dev/tollgate/store"
)

// A Verdict is how a store's failure is answered.
type Verdict struct {
	// Invalid is set when the store could not hold a value the caller sent: the
	// caller's mistake (answered as invalid input), not an outage.
	Invalid bool
	// Message is what the caller is told; it never names the store.
	Message string
	// Level and Log are how the failure is logged, with the store and its error.
	Level slog.Level
	Log   string
}

// Judge returns the verdict on err, a store's failure while serving ctx. It is judged
// by the request's context rather than by err (a store's own timeout wraps
// context.DeadlineExceeded too, and is an outage): INFO when the client canceled the
// request, WARN when its deadline passed, ERROR when the store failed while the
// request was live. A value the store cannot hold ([store.ErrInvalid]) is INFO.
func Judge(ctx context.Context, err error) Verdict {
	if errors.Is(err, store.ErrInvalid) {
		// The checks at the edge should have caught it.
		return Verdict{Invalid: true, Level: slog.LevelInfo,
			Message: "a value in the request cannot be stored: use valid UTF-8 text without NUL or control characters",
			Log:     "tollgate: a store refused a value it cannot hold"}
	}
	switch cause := ctx.Err(); {
	case errors.Is(cause, context.Canceled):
		return Verdict{Level: slog.LevelInfo,
			Message: "the request was canceled before the service could answer; nothing was done and nothing was charged",
			Log:     "tollgate: answered 503: the client canceled the request before the store answered"}
	case cause != nil:
		return Verdict{Level: slog.LevelWarn,
			Message: "the request's deadline passed before the service could answer; nothing was done and nothing was charged",
			Log:     "tollgate: answered 503: the request's deadline passed before the store answered"}
	}
	return Verdict{Level: slog.LevelError,
		Message: "the service cannot reach its data store; nothing was done and nothing was charged; try again shortly",
		Log:     "tollgate: answered 503: store unavailable"}
}
