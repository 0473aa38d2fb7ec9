package mcp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestSDKLogHandler checks the levels at which the SDK's records reach the host's
// handler: a client's mistake at Info, the SDK's failures at their level, its Info
// records not at all, attributes and groups kept.
func TestSDKLogHandler(t *testing.T) {
	tests := []struct {
		name      string
		level     slog.Level
		msg       string
		hostLevel slog.Level
		want      string // the level logged; "" for none
	}{
		{"a call before initialize", slog.LevelError, "method invalid during initialization", slog.LevelDebug, "INFO"},
		{"initialized before initialize", slog.LevelError, "initialized before initialize", slog.LevelDebug, "INFO"},
		{"initialized twice", slog.LevelError, "duplicate initialized notification", slog.LevelDebug, "INFO"},
		{"initialize twice", slog.LevelError, "duplicate initialize request", slog.LevelDebug, "INFO"},
		{"a removed method", slog.LevelError, "method removed in the new protocol", slog.LevelDebug, "INFO"},
		{"a sessionless request", slog.LevelWarn, `rejecting request with protocol version "2026-07-28": this server is stateful`, slog.LevelDebug, "INFO"},
		{"a mistake, host at Warn", slog.LevelError, "duplicate initialize request", slog.LevelWarn, ""},
		{"the SDK's failure", slog.LevelError, "jsonrpc2 internal error", slog.LevelDebug, "ERROR"},
		{"the SDK's warning", slog.LevelWarn, "Writing close event: broken pipe", slog.LevelDebug, "WARN"},
		{"the SDK's failure, host at Error", slog.LevelError, "keepalive ping failed; closing session", slog.LevelError, "ERROR"},
		{"a session starts", slog.LevelInfo, "server session connected", slog.LevelDebug, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			host := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tt.hostLevel})
			logger := slog.New(sdkLogHandler{host}).With("session", "s1").WithGroup("g")
			logger.Log(t.Context(), tt.level, tt.msg, "method", "tools/list")
			if tt.want == "" {
				if buf.Len() != 0 {
					t.Fatalf("logged %s", buf.String())
				}
				return
			}
			var r map[string]any
			if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
				t.Fatalf("%q: %v", buf.String(), err)
			}
			if r["level"] != tt.want || !strings.HasPrefix(r["msg"].(string), tt.msg[:10]) || r["session"] != "s1" {
				t.Fatalf("logged %s; want level %s", buf.String(), tt.want)
			}
			if g, _ := r["g"].(map[string]any); g["method"] != "tools/list" {
				t.Fatalf("the group was lost: %s", buf.String())
			}
		})
	}
}
