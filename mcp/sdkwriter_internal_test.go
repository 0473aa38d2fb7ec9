package mcp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/edge"
)

// TestSDKWriter checks what the writer between the SDK and the client passes on and
// what it holds back.
func TestSDKWriter(t *testing.T) {
	t.Run("an answer passes", func(t *testing.T) {
		rec := httptest.NewRecorder()
		sw := &sdkWriter{ResponseWriter: rec}
		sw.Header().Set("Content-Type", "text/event-stream")
		sw.WriteHeader(http.StatusOK)
		sw.Write([]byte(": ok\n\n"))
		if err := http.NewResponseController(sw).Flush(); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusOK || rec.Body.String() != ": ok\n\n" || !rec.Flushed {
			t.Fatalf("%d %q flushed %v", rec.Code, rec.Body, rec.Flushed)
		}
		if wrote, status, _ := sw.result(); !wrote || status != 0 {
			t.Fatalf("result %v %d", wrote, status)
		}
	})
	t.Run("a body without a status passes", func(t *testing.T) {
		rec := httptest.NewRecorder()
		sw := &sdkWriter{ResponseWriter: rec}
		sw.Write([]byte("{}"))
		if rec.Body.String() != "{}" {
			t.Fatalf("%q", rec.Body)
		}
	})
	t.Run("a JSON refusal passes", func(t *testing.T) {
		rec := httptest.NewRecorder()
		sw := &sdkWriter{ResponseWriter: rec}
		sw.Header().Set("Content-Type", "application/json; charset=utf-8")
		sw.WriteHeader(http.StatusBadRequest)
		sw.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"m"}}`))
		if rec.Code != http.StatusBadRequest || !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%d %q", rec.Code, rec.Body)
		}
		if _, status, _ := sw.result(); status != 0 {
			t.Fatalf("held %d", status)
		}
	})
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusInternalServerError} {
		t.Run("a plain refusal is held: "+http.StatusText(status), func(t *testing.T) {
			rec := httptest.NewRecorder()
			sw := &sdkWriter{ResponseWriter: rec}
			http.Error(sw, "session not found", status)
			if err := http.NewResponseController(sw).Flush(); err != nil {
				t.Fatal(err)
			}
			sw.Write([]byte("more"))
			sw.WriteHeader(http.StatusOK) // superfluous: ignored
			if rec.Body.Len() != 0 || rec.Flushed {
				t.Fatalf("the refusal reached the client: %q flushed %v", rec.Body, rec.Flushed)
			}
			wrote, got, text := sw.result()
			if wrote || got != status || text != "session not found\nmore" {
				t.Fatalf("result %v %d %q", wrote, got, text)
			}
		})
	}
	t.Run("a refusal without a body is held", func(t *testing.T) {
		rec := httptest.NewRecorder()
		sw := &sdkWriter{ResponseWriter: rec}
		sw.WriteHeader(http.StatusBadRequest)
		if _, status, text := sw.result(); status != http.StatusBadRequest || text != "" {
			t.Fatalf("%d %q", status, text)
		}
	})
	t.Run("the held text is bounded", func(t *testing.T) {
		sw := &sdkWriter{ResponseWriter: httptest.NewRecorder()}
		http.Error(sw, strings.Repeat("x", 5000), http.StatusBadRequest)
		sw.Write(bytes.Repeat([]byte("y"), 5000))
		if _, _, text := sw.result(); len(text) != maxHeldText {
			t.Fatalf("kept %d bytes", len(text))
		}
	})
	t.Run("after the answer began, a late error status passes", func(t *testing.T) {
		rec := httptest.NewRecorder()
		sw := &sdkWriter{ResponseWriter: rec}
		sw.WriteHeader(http.StatusOK)
		http.Error(sw, "late", http.StatusBadRequest)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "late") {
			t.Fatalf("%d %q", rec.Code, rec.Body)
		}
	})
}

// TestTranslate checks the answers to the SDK's plain refusals: the table's, and the
// fallbacks for a refusal the table does not know and for a failure of the SDK.
func TestTranslate(t *testing.T) {
	var logs bytes.Buffer
	h := &Handler{
		log:  slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		door: edge.Default().Door(doorSpec),
	}
	tests := []struct {
		name           string
		status         int
		text           string
		wantStatus     int
		wantCode       int64
		wantName       string
		wantIn, notIn  string
		wantLog, level string
	}{
		{"known", 404, "session not found\n", 404, codeInvalidRequest, "session_not_found", "initialize", "session not found", "", ""},
		{"corrected status", 400, "Accept must contain both 'application/json' and 'text/event-stream'\n", 406, codeInvalidRequest, "not_acceptable", "Accept", "", "", ""},
		{"protocol versions", 400, "Bad Request: Unsupported protocol version (supported versions: 2025-11-25,2025-06-18)\n", 400, -32022, "unsupported_protocol_version", "2025-11-25, 2025-06-18", "", "", ""},
		{"unknown refusal", 400, "something new\x00\xff\nsecond line", 400, codeInvalidRequest, "invalid_request", "(HTTP 400): something new", "second", "has no translation", "INFO"},
		{"unknown 401", 401, "invalid token", 401, CodeUnauthorized, "unauthorized", "invalid token", "", "has no translation", "INFO"},
		{"unknown 403", 403, "", 403, CodeForbidden, "forbidden", "(HTTP 403)", "", "has no translation", "INFO"},
		{"a failure of the SDK", 500, "storing stream: disk full", 500, codeInternal, "internal", "try again", "disk", "failed to serve", "ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs.Reset()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/v1/mcp", nil)
			req.Header.Set("Origin", "https://app.example")
			h.translate(rec, req, json.RawMessage("7"), tt.status, tt.text)
			var r struct {
				ID    int `json:"id"`
				Error struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
					Data    struct{ Code string }
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatalf("%q: %v", rec.Body, err)
			}
			if rec.Code != tt.wantStatus || r.ID != 7 || r.Error.Code != tt.wantCode || r.Error.Data.Code != tt.wantName {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if !strings.Contains(r.Error.Message, tt.wantIn) || tt.notIn != "" && strings.Contains(r.Error.Message, tt.notIn) {
				t.Errorf("message %q", r.Error.Message)
			}
			if rec.Header().Get("Access-Control-Allow-Origin") == "" {
				t.Error("no CORS headers")
			}
			if tt.wantLog == "" {
				if logs.Len() != 0 {
					t.Errorf("logged %s", logs.String())
				}
				return
			}
			if !strings.Contains(logs.String(), tt.wantLog) || !strings.Contains(logs.String(), `"level":"`+tt.level+`"`) {
				t.Errorf("log %s; want %q at %s", logs.String(), tt.wantLog, tt.level)
			}
		})
	}
}
