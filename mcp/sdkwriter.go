package mcp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's streamable handler answers most transport misuse with http.Error: a
// text/plain body and no JSON-RPC error, which a client cannot tie to its request and
// a model cannot read as one. The SDK offers no hook for these answers, so the handler
// stands a sdkWriter between the SDK and the client: it passes through everything the
// SDK writes except a refusal (a status of 400 or more) that is not JSON, which it
// holds back, and the handler then answers with the JSON-RPC error that sdkRefusals
// gives for that text. The SDK writes these refusals on the request's own goroutine,
// before anything else, so holding one back never delays or reorders a stream.

// writerState is what a sdkWriter has done with the response.
type writerState uint8

const (
	untouched writerState = iota // nothing written yet
	passed                       // the SDK's answer is going to the client
	held                         // a plain refusal of the SDK, held back for translation
)

// maxHeldText bounds the text of a refusal that a sdkWriter keeps.
const maxHeldText = 1024

// sdkWriter is the http.ResponseWriter the SDK's handler writes to (see above).
type sdkWriter struct {
	http.ResponseWriter

	mu     sync.Mutex
	state  writerState
	status int    // the held refusal's status
	text   []byte // the held refusal's text, at most maxHeldText bytes
}

// WriteHeader passes the status on, or holds back a refusal that is not JSON.
func (s *sdkWriter) WriteHeader(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case held:
		return
	case untouched:
		if status >= http.StatusBadRequest && !isJSON(s.Header().Get("Content-Type")) {
			s.state, s.status = held, status
			return
		}
		s.state = passed
	}
	s.ResponseWriter.WriteHeader(status)
}

// Write passes the body on, or keeps the start of a held refusal's text.
func (s *sdkWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == held {
		s.text = append(s.text, b[:min(len(b), maxHeldText-len(s.text))]...)
		return len(b), nil
	}
	s.state = passed
	return s.ResponseWriter.Write(b)
}

// FlushError flushes what was passed on; a held refusal stays held. The SDK flushes
// through http.ResponseController, which looks for this method first.
func (s *sdkWriter) FlushError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == held {
		return nil
	}
	s.state = passed
	return http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer (for deadlines).
func (s *sdkWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// result reports whether anything reached the client, and the refusal held back, if
// any (status 0 when none).
func (s *sdkWriter) result() (wrote bool, status int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == held {
		return false, s.status, string(s.text)
	}
	return s.state == passed, 0, ""
}

func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// An sdkRefusal is the JSON-RPC answer to one of the SDK's plain-text refusals.
type sdkRefusal struct {
	prefix  string // the start of the SDK's text
	status  int    // the HTTP status to answer with; 0 keeps the SDK's
	code    int64
	name    string // X-Error-Code and the error's data
	message string
}

// Messages shared by several refusals.
const (
	msgSessionNotFound = "the session in Mcp-Session-Id does not exist here (it was ended, timed out, or began on another instance); start a new one: send initialize without the Mcp-Session-Id header"
	msgNoReplay        = "this server does not resume event streams: open the GET event stream again without Last-Event-ID"
)

// sdkRefusals are the SDK's plain-text refusals of an HTTP request (go-sdk v1.8.0,
// mcp/streamable.go and auth/auth.go), by the start of their text, and the answers the
// handler gives instead; its refusals of a message by its method are methodRefusal's.
// The tests send a request that reaches each one.
var sdkRefusals = []sdkRefusal{
	{"session not found", 0, codeInvalidRequest, "session_not_found", msgSessionNotFound},
	{"session is closing", 0, codeInvalidRequest, "session_not_found", msgSessionNotFound},
	{"session user mismatch", 0, CodeForbidden, "forbidden",
		"the session in Mcp-Session-Id was started with another credential; start a session of your own with initialize"},
	// 406, as the TypeScript and Python SDKs answer: the client refuses the media types
	// of the answer.
	{"Accept must contain both", http.StatusNotAcceptable, codeInvalidRequest, "not_acceptable",
		"send Accept: application/json, text/event-stream (the server may answer a POST in either)"},
	{"Accept must contain 'text/event-stream'", http.StatusNotAcceptable, codeInvalidRequest, "not_acceptable",
		"a GET opens the session's event stream: send Accept: text/event-stream"},
	{"Bad Request: GET requires an Mcp-Session-Id header", 0, codeInvalidRequest, "invalid_request",
		"a GET opens the event stream of a session: send the Mcp-Session-Id header that the answer to initialize carried"},
	{"Bad Request: DELETE requires an Mcp-Session-Id header", 0, codeInvalidRequest, "invalid_request",
		"DELETE ends a session: send the Mcp-Session-Id header of the session to end"},
	{"Content-Type must be", 0, codeInvalidRequest, "unsupported_media_type",
		"send the JSON-RPC message with Content-Type: application/json"},
	{"Bad Request: Unsupported protocol version", 0, sdk.CodeUnsupportedProtocolVersion, "unsupported_protocol_version",
		"the Mcp-Protocol-Version header names a version this server does not speak; send the version that initialize agreed on"},
	{"can't send Last-Event-ID for POST", 0, codeInvalidRequest, "invalid_request",
		"Last-Event-ID belongs on the GET that resumes an event stream: send the POST without it"},
	{"malformed Last-Event-ID", 0, codeInvalidRequest, "invalid_request", msgNoReplay},
	{"stream replay unsupported", 0, codeInvalidRequest, "invalid_request", msgNoReplay},
	{"failed to replay events", 0, codeInvalidRequest, "invalid_request", msgNoReplay},
	{"stream ID conflicts with ongoing stream", 0, codeInvalidRequest, "conflict",
		"this session already has an open event stream; close it before opening another"},
	{"JSON-RPC batching is not supported", 0, codeInvalidRequest, "invalid_request",
		"JSON-RPC batches were removed in protocol version 2025-06-18: send one message per POST"},
	{"malformed payload", 0, codeInvalidRequest, "invalid_request",
		`a batch must be an array of JSON-RPC 2.0 messages, each an object with "jsonrpc": "2.0"`},
	{"request body exceeds", 0, codeInvalidRequest, "body_too_large", "the request body is larger than the server accepts"},
	{"failed to read body", 0, codeInvalidRequest, "invalid_input", "the request body cannot be read"},
	{"POST requires a non-empty body", 0, codeParseError, "parse_error", "the body is empty; send one JSON-RPC message"},
	{"Method Not Allowed", 0, codeInvalidRequest, "method_not_allowed", msgMethods},
	{"unsupported method", 0, codeInvalidRequest, "method_not_allowed", msgMethods},
}

// msgMethods says which HTTP methods the endpoint takes.
const msgMethods = "the MCP endpoint takes POST (messages), GET (the event stream) and DELETE (end a session)"

// translate answers a refusal that the SDK wrote as plain text (held back by a
// sdkWriter) with its JSON-RPC error: the request's id when it had one, the code and
// message of sdkRefusals, and the SDK's status unless the entry corrects it. A refusal
// it does not know keeps the SDK's status, gets the code of that status and quotes the
// SDK's text; a failure of the SDK itself (5xx) is logged and reported as internal.
func (h *Handler) translate(w http.ResponseWriter, r *http.Request, id json.RawMessage, status int, text string) {
	text = strings.TrimSpace(text)
	h.door.CORS(w.Header(), r)
	for _, ref := range sdkRefusals {
		if !strings.HasPrefix(text, ref.prefix) {
			continue
		}
		if ref.status != 0 {
			status = ref.status
		}
		message := ref.message
		if ref.code == sdk.CodeUnsupportedProtocolVersion {
			if _, versions, ok := strings.Cut(text, "supported versions: "); ok {
				message += " (this server speaks " + strings.ReplaceAll(strings.TrimSuffix(versions, ")"), ",", ", ") + ")"
			}
		}
		writeRPCError(w, status, id, ref.code, ref.name, message)
		return
	}
	if status >= http.StatusInternalServerError {
		h.log.ErrorContext(r.Context(), "mcp: the MCP SDK failed to serve a request", "status", status, "error", text)
		writeRPCError(w, status, id, codeInternal, "internal", "internal error: the request could not be served; try again")
		return
	}
	h.log.InfoContext(r.Context(), "mcp: a refusal of the MCP SDK has no translation", "status", status, "text", text)
	code, name := int64(codeInvalidRequest), "invalid_request"
	switch status {
	case http.StatusUnauthorized:
		code, name = CodeUnauthorized, "unauthorized"
	case http.StatusForbidden:
		code, name = CodeForbidden, "forbidden"
	}
	message := "the request was refused (HTTP " + strconv.Itoa(status) + ")"
	if text, _, _ = strings.Cut(text, "\n"); text != "" {
		message += ": " + text // made clean text by writeRPCError
	}
	writeRPCError(w, status, id, code, name, message)
}
