package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// The handler reads the JSON-RPC envelope of a POSTed body (each message's jsonrpc
// member, id, method and the kind of its params) before the SDK reads the body. The
// SDK (go-sdk v1.8.0) offers no hook between reading a body and serving it, and these
// things cannot be left to it:
//
//   - The id. The SDK reads a numeric id into a float64 and answers it as an int64
//     (internal/jsonrpc2/messages.go, MakeID): it would run and charge a call with id
//     1.5 and answer it as 1. No middleware sees the id.
//   - Params that are not an object, and a session's lifecycle. The SDK decodes params
//     and checks that a session is initialized before its receiving middleware runs
//     (mcp/shared.go handleReceive, mcp/server.go ServerSession.handle): it answers
//     params it cannot decode with a message naming its Go types, null params where
//     the method needs them with -32600, a request before initialization with code 0,
//     and a sessionless request other than initialize makes it start a session. It answers a POST without a
//     call 202 as soon as its messages are queued, before it decodes them
//     (mcp/streamable.go, streamableServerConn.servePOST), so a notification gets no
//     other answer.
//   - Whether the request carries a tool call. A key from the service's key cache is
//     checked against the key store before any other request reaches the SDK, and
//     its refusal is the HTTP request's (401 or 403); the receiving middleware would
//     see the method too late: after the 202 of a notification, and after the session
//     that initialize starts.
//   - The id of the answer to a refusal of the request as a whole: of its credential,
//     or one of the SDK's plain-text refusals, which carry none (see sdkwriter.go).
//
// Whether a method exists, whether it is a request or a notification and whether it
// needs params is the SDK's to say: it checks each message against its own methods
// before it serves any (mcp/shared.go checkRequest), and methodRefusal restates its
// answer as a JSON-RPC error.

// A message is what the handler reads of a POSTed JSON-RPC message.
type message struct {
	id        json.RawMessage // nil for a notification, a batch, a body that is not JSON or an id that is not valid
	badID     bool            // the id is not one the SDK answers as it was sent (see validID)
	method    string
	version   string          // the jsonrpc member
	badParams bool            // params that are present and not a JSON object
	params    json.RawMessage // the params, for paramsMisuse
	single    bool            // the body is one JSON object
	valid     bool            // the body is JSON
	// batch holds the messages of a batch, a JSON array of them (protocol 2025-03-26
	// and earlier), which is neither single nor has an id, and batchSize their number.
	// A batch larger than the handler takes is not read: its batch is nil, and its
	// batchSize one more than the handler takes.
	batch     []message
	batchSize int
}

// isCall reports whether the message is one request, which the answer to a refusal of
// its method or params answers (with 200): a notification or a batch has no id to
// answer, so its refusal refuses the HTTP request (400).
func (m message) isCall() bool { return m.single && m.id != nil }

// peek reads the envelope of a POSTed message, or of each message of a batch of at
// most maxBatch messages, without their params.
func peek(body []byte, maxBatch int) message {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if n := countElements(trimmed, maxBatch); n > maxBatch {
			// Refused for its size (see batchMisuse) before anything else is read.
			return message{valid: true, batchSize: n}
		}
		var raw []json.RawMessage
		if err := json.Unmarshal(trimmed, &raw); err != nil {
			return message{}
		}
		m := message{valid: true, batch: make([]message, len(raw)), batchSize: len(raw)}
		for i, r := range raw {
			m.batch[i] = peekOne(r)
		}
		return m
	}
	return peekOne(trimmed)
}

// countElements counts the elements of a JSON array, b, up to limit+1: it stops at the
// first element past limit. It reads b as JSON without checking it, so that a batch
// too large is refused for its size after a scan of its first limit+1 elements, without
// decoding anything; what it counts in a body that is not JSON is refused anyway.
func countElements(b []byte, limit int) int {
	n, depth, started, inString, escaped := 0, 0, false, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if depth == 1 && !started && c != ']' {
			started, n = true, 1 // the first element begins
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				n++
			}
		}
		if n > limit {
			break
		}
	}
	return n
}

// peekOne reads the envelope of one message.
func peekOne(b []byte) message {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if len(b) == 0 || b[0] != '{' {
		return message{valid: json.Valid(b)} // not an object
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return message{valid: json.Valid(b)}
	}
	if string(m.ID) == "null" {
		m.ID = nil
	}
	badID := m.ID != nil && !validID(m.ID)
	if badID {
		m.ID = nil // answered with a null id, as JSON-RPC asks of an id that cannot be read
	}
	return message{id: m.ID, badID: badID, method: m.Method, version: m.JSONRPC,
		badParams: len(m.Params) > 0 && m.Params[0] != '{', params: m.Params, single: true, valid: true}
}

// maxID is the largest magnitude of an integer request id: a float64 holds every
// integer up to it exactly.
const maxID = 1<<53 - 1

// validID reports whether id, a JSON value, is an id the SDK answers as it was sent: a
// string, or an integer written without a fraction or an exponent, of at most maxID in
// magnitude. The SDK reads a number as a float64 and answers it as an int64, so it
// would answer 1.5 as 1 and 2^64 as -2^63, after serving the request.
func validID(id json.RawMessage) bool {
	if id[0] == '"' {
		return true
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil && -maxID <= n && n <= maxID
}

// misuse finds the misuses of a POST that the handler answers itself (see above), and
// returns the HTTP status, JSON-RPC code, the cause's name ("" for the code's) and
// message to answer them with; status 0 lets the message through to the SDK.
func (h *Handler) misuse(r *http.Request, m message) (int, int64, string, string) {
	switch {
	case !m.valid:
		return http.StatusBadRequest, codeParseError, "", "the body is not JSON; send one JSON-RPC message"
	case m.batchSize > 0 || m.batch != nil:
		return h.batchMisuse(r, m)
	case !m.single:
		return http.StatusBadRequest, codeInvalidRequest, "", "the body is not a JSON-RPC message: send one JSON object"
	}
	status, code, text := h.messageMisuse(r, m)
	return status, code, "", text
}

// batchMisuse checks a batch (protocol 2025-03-26 and earlier): its size, the
// session's protocol version, and then message by message, as messageMisuse checks a
// single one. A batch has no id to answer a misuse with, so every misuse refuses the
// whole batch, with 400. A batch larger than MaxBatchMessages is refused before its
// messages are read, and so is a batch on a session that agreed on a version without
// batches (2025-06-18 and later), whatever the request's Mcp-Protocol-Version says.
// initialize, which the protocol keeps out of batches, is refused too: in a batch the
// SDK would start a session with it and run the rest before the session is
// initialized.
func (h *Handler) batchMisuse(r *http.Request, m message) (int, int64, string, string) {
	if m.batchSize > h.limits.maxBatch {
		return http.StatusBadRequest, codeInvalidRequest, "batch_too_large", "the batch holds more than " + strconv.Itoa(h.limits.maxBatch) +
			" messages, the most a batch may hold; send them in smaller batches, or one message per POST"
	}
	if v, ok := h.sessions.version(r.Header.Get(sessionHeader)); ok && v >= versionWithoutBatches {
		return http.StatusBadRequest, codeInvalidRequest, "", "JSON-RPC batches were removed in protocol version " + versionWithoutBatches +
			", and this session agreed on version " + v + ": send one message per POST"
	}
	if r.Header.Get("Mcp-Protocol-Version") >= versionWithoutBatches {
		return 0, 0, "", "" // the SDK refuses batches in these versions
	}
	if len(m.batch) == 0 {
		return http.StatusBadRequest, codeInvalidRequest, "", "the batch is empty; send one JSON-RPC message, or a batch of them"
	}
	for i, m := range m.batch {
		status, code, text := 0, int64(0), ""
		switch {
		case m.method == methodInitialize:
			status, code, text = http.StatusBadRequest, codeInvalidRequest, "initialize cannot be part of a batch: send it alone"
		case !m.single:
			status, code, text = http.StatusBadRequest, codeInvalidRequest, "it is not a JSON-RPC message, an object"
		default:
			status, code, text = h.messageMisuse(r, m)
		}
		if status != 0 {
			return http.StatusBadRequest, code, "", "message " + strconv.Itoa(i+1) + " of the batch: " + text
		}
	}
	return 0, 0, "", ""
}

// versionWithoutBatches is the first protocol version without JSON-RPC batches.
const versionWithoutBatches = "2025-06-18"

// The methods the handler names: a session begins with initialize, tools/call is the
// method of the calls the service charges, and server/discover is how a client of the
// sessionless protocol (2026-07-28) asks which versions a server speaks. Every other
// method is the SDK's to know.
const (
	methodInitialize = "initialize"
	methodCallTool   = "tools/call"
	methodDiscover   = "server/discover"
)

// messageMisuse checks one JSON-RPC message: its version, its id, its params, and the
// session it needs.
func (h *Handler) messageMisuse(r *http.Request, m message) (int, int64, string) {
	if m.version != "2.0" {
		return http.StatusBadRequest, codeInvalidRequest, `the body is not a JSON-RPC 2.0 message: it needs "jsonrpc": "2.0"`
	}
	if m.badID {
		return http.StatusBadRequest, codeInvalidRequest,
			"the id of a request must be a string or an integer of at most 2^53-1 in magnitude, which the server can answer as it was sent"
	}
	if m.method == "" {
		return 0, 0, "" // a response to a request of the server: the SDK takes it
	}
	if m.badParams {
		// JSON-RPC allows params to be left out, and MCP's params are objects.
		return refusalStatus(m), codeInvalidParams, "the params of " + quote(m.method) + " must be a JSON object"
	}
	if text := paramsMisuse(m); text != "" {
		return refusalStatus(m), codeInvalidParams, text
	}
	sid := r.Header.Get(sessionHeader)
	// A request of the sessionless protocol (2026-07-28) is answered by the SDK, which
	// tells the client the versions this stateful server speaks; everything else needs
	// a session, which only initialize starts.
	newProtocol := m.id != nil && (r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" || m.method == methodDiscover)
	switch {
	case sid == "" && m.method != methodInitialize && !newProtocol:
		return http.StatusBadRequest, codeInvalidRequest,
			"no session: start one with an initialize request, then send its Mcp-Session-Id header with every request"
	case sid != "" && m.method == methodInitialize:
		return http.StatusBadRequest, codeInvalidRequest,
			"this session is already initialized; to start another, send initialize without the Mcp-Session-Id header"
	}
	return 0, 0, ""
}

// refusalStatus is the HTTP status of a refusal of a message's method or params: 200
// for a request, whose answer is the JSON-RPC error, and 400 for a notification or a
// batch, which get no answer of their own.
func refusalStatus(m message) int {
	if m.isCall() {
		return http.StatusOK
	}
	return http.StatusBadRequest
}

// The beginnings of the texts of the SDK's refusals of a message by its method
// (go-sdk v1.8.0 mcp/shared.go checkRequest, with the messages of jsonrpc2's
// ErrNotHandled and ErrInvalidRequest), which its streamable transport answers with a
// plain 400 before it serves anything.
const (
	sdkNotHandled      = "JSON RPC not handled: "
	sdkUnexpectedID    = "invalid request: unexpected id for "
	sdkMissingID       = "invalid request: missing id for "
	sdkMissingParams   = `invalid request: missing required "params"`
	batchMessagePrefix = "a message of the batch: "
)

// methodRefusal restates the SDK's refusal of a message by its method as the answer
// to it: an unknown method (-32601), an id on a notification or none on a request
// (-32600), and missing params (-32602), with the status of refusalStatus for the
// method and params. ok is false for any other text. The SDK names the method in its
// text; for one message the handler names it as it read it.
func methodRefusal(m message, text string) (status int, code int64, msg string, ok bool) {
	text = strings.TrimSpace(text)
	method, prefix := quote(m.method), ""
	if !m.single {
		method, prefix = sdkQuoted(text), batchMessagePrefix
	}
	switch {
	case strings.HasPrefix(text, sdkNotHandled):
		if m.single && m.id == nil {
			return http.StatusBadRequest, codeMethodNotFound, "the server has no notification " + method, true
		}
		return refusalStatus(m), codeMethodNotFound, prefix + "the server has no method " + method + "; its tools are called with tools/call", true
	case strings.HasPrefix(text, sdkUnexpectedID):
		return http.StatusBadRequest, codeInvalidRequest, prefix + method + " is a notification: send it without an id", true
	case strings.HasPrefix(text, sdkMissingID):
		return http.StatusBadRequest, codeInvalidRequest, prefix + method + " is a request: send it with an id", true
	case strings.HasPrefix(text, sdkMissingParams):
		if !m.single {
			return http.StatusBadRequest, codeInvalidParams, prefix + "its method needs params", true
		}
		return refusalStatus(m), codeInvalidParams, method + " needs params", true
	}
	return 0, 0, "", false
}

// sdkQuoted returns the first Go-quoted string of an SDK text, quoted again for a
// message, or "a method" when it has none.
func sdkQuoted(text string) string {
	i := strings.IndexByte(text, '"')
	if i < 0 {
		return "a method"
	}
	q, err := strconv.QuotedPrefix(text[i:])
	if err != nil {
		return "a method"
	}
	s, _ := strconv.Unquote(q)
	return quote(s)
}
