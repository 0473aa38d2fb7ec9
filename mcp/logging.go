package mcp

import (
	"context"
	"log/slog"
	"strings"
)

// sdkLogHandler is the slog.Handler the MCP SDK logs to (its ServerOptions.Logger and
// StreamableHTTPOptions.Logger), in front of the host's handler. The SDK logs every
// session's start and end at Info, which it drops, and logs at Error or Warn some
// events that are a client's mistake, not the service's failure: a message out of
// order in a session's lifecycle, or a protocol version this server does not serve.
// Those it passes at Info, so that Error stays for the service's own failures; the
// SDK's other records pass at their level.
type sdkLogHandler struct{ slog.Handler }

// clientMistakes are the messages of the SDK's records (go-sdk v1.8.0) that report a
// client's mistake, by their start.
var clientMistakes = []string{
	"method invalid during initialization",    // a call before initialize
	"initialized before initialize",           // notifications/initialized before initialize
	"duplicate initialized notification",      // notifications/initialized twice
	"duplicate initialize request",            // initialize twice
	"method removed in the new protocol",      // a 2026-07-28 client calling a method it dropped
	"rejecting request with protocol version", // a 2026-07-28 request to this stateful server
}

// Enabled lets through what may be logged: records of level Warn and above, some of
// which Handle passes at Info.
func (h sdkLogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn
}

// Handle passes a record at its level, or at Info when it reports a client's mistake,
// if the host's handler takes that level.
func (h sdkLogHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, m := range clientMistakes {
		if strings.HasPrefix(r.Message, m) {
			r.Level = slog.LevelInfo
			break
		}
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h sdkLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sdkLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h sdkLogHandler) WithGroup(name string) slog.Handler {
	return sdkLogHandler{h.Handler.WithGroup(name)}
}
