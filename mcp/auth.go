package mcp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
)

// A credKind is the form of a request's credential.
type credKind uint8

const (
	credKey       credKind = iota + 1 // x-api-key
	credBearerKey                     // Authorization: Bearer <key>
	credSession                       // x-jwt
	credToken                         // Authorization: Bearer <OAuth access token>
)

// A credential is what a request presented, kept so that an open stream can be
// authenticated again with it.
type credential struct {
	kind  credKind
	key   auth.Credential // credKey, credBearerKey, credSession
	token string          // credToken
	addr  netip.Addr
}

// errInvalidToken refuses an OAuth access token that VerifyToken did not accept.
var errInvalidToken = errors.New("mcp: invalid access token")

// authenticate reads the request's credential, performing the edge check, and
// authenticates it for the mcp channel. current asks for a key from the service's key
// cache to be checked against the key store too (see [tollgate.Caller.Verify]): for
// every request but a tool call, whose admission checks it.
func (h *Handler) authenticate(r *http.Request, current bool) (*caller, error) {
	cred, err := h.credentialFrom(r)
	if err != nil {
		return nil, err
	}
	p, as, err := h.authenticateAs(r.Context(), cred, current)
	if err != nil {
		return nil, err
	}
	// An MCP session belongs to the key it was opened with (a session token acts as
	// the key that started it), so no other key's requests may use it; only a session
	// token that names no key acts for the whole account.
	// The access log's record of the request goes with the caller to the tool calls,
	// which the SDK runs under a context of its own.
	rec := reqlog.From(r.Context())
	rec.Identify(p.Account.ID, p.Key.ID)
	c := &caller{door: h.door, p: p, as: as, cred: cred, user: "key:" + p.Key.ID, rec: rec}
	if p.Key.ID == "" {
		c.user = "account:" + p.Account.ID
	}
	return c, nil
}

// credentialFrom extracts the credential of a request. The key forms are those of
// REST ([edge.CredentialFrom]); with OAuth on, an Authorization: Bearer value that
// is not UUID-shaped is an access token.
func (h *Handler) credentialFrom(r *http.Request) (credential, error) {
	addr := h.door.Addr(r)
	cred, err := edge.CredentialFrom(r.Header)
	if err == nil {
		kind := credKey
		switch cred.Kind {
		case auth.BearerHeader:
			kind = credBearerKey
		case auth.SessionHeader:
			kind = credSession
		}
		return credential{kind: kind, key: cred, addr: addr}, nil
	}
	if h.verify != nil && tollgate.CodeOf(err) == tollgate.CodeMalformedCredential && r.Header.Get("X-Api-Key") == "" {
		if tok, ok := bearer(r.Header.Get("Authorization")); ok {
			return credential{kind: credToken, token: tok, addr: addr}, nil
		}
	}
	return credential{}, err
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(v string) (string, bool) {
	if len(v) <= 7 || !strings.EqualFold(v[:7], "bearer ") {
		return "", false
	}
	tok := strings.TrimSpace(v[7:])
	return tok, tok != "" && len(tok) <= maxToken
}

// maxToken bounds the length of an access token the handler passes to VerifyToken.
const maxToken = 4096

// authenticateAs authenticates a credential for the mcp channel: a key by its value, a
// session token by its account, an access token by the key it was granted for. It
// returns the principal and the service's Caller, which the request's tool calls
// present again.
func (h *Handler) authenticateAs(ctx context.Context, cred credential, current bool) (tollgate.Principal, tollgate.Caller, error) {
	as := tollgate.Caller{Credential: cred.key, Channel: auth.ChannelMCP, Addr: cred.addr}
	if cred.kind == credToken {
		keyID, err := h.verify(ctx, cred.token)
		if err != nil {
			var e *tollgate.Error
			switch {
			case ctx.Err() != nil:
				h.log.InfoContext(ctx, "mcp: answered 503: the request was canceled while its access token was checked", "error", err)
				return tollgate.Principal{}, as, &tollgate.Error{Code: tollgate.CodeUnavailable, Err: err,
					Message: "the request was canceled before the token could be checked"}
			case errors.As(err, &e) && e.Code == tollgate.CodeUnavailable:
				return tollgate.Principal{}, as, e
			}
			return tollgate.Principal{}, as, errInvalidToken
		}
		as = tollgate.Caller{KeyID: keyID, Channel: auth.ChannelMCP, Addr: cred.addr}
	}
	var (
		p   tollgate.Principal
		err error
	)
	as.Verify = current
	p, err = h.svc.Authenticate(ctx, as)
	return p, as, err
}

// checkAgain authenticates an open stream's credential again, bypassing any key cache.
func (h *Handler) checkAgain(ctx context.Context, c *caller) error {
	_, _, err := h.authenticateAs(ctx, c.cred, true)
	return err
}

// JSON-RPC error codes of the answers to requests that the handler refuses for their
// credential: server errors, in the range JSON-RPC reserves for them, chosen apart from
// the codes the MCP SDKs give meanings of their own (-32000 to -32005, -32020 to
// -32022, -32042). The error's data names the cause ({"code": "unauthorized"}), as
// X-Error-Code does.
const (
	// CodeUnauthorized is the code of a request without a credential, or with an
	// unknown key or an invalid token (HTTP 401).
	CodeUnauthorized = -32041
	// CodeForbidden is the code of a request whose key may not use MCP, may not be
	// used from its address, or no longer works: revoked or expired (HTTP 403).
	CodeForbidden = -32043
)

// The standard JSON-RPC error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

// refuse answers a request whose credential was refused: the edge's bare 403 for a
// missing-form or malformed key, 401 with the challenge for no credential or an unknown
// one, 403 for a blocked key, and the status of the code otherwise.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, id []byte, err error) {
	if errors.Is(err, errInvalidToken) {
		h.unauthorized(w, r, id, true, "unauthorized",
			"the access token is invalid or has expired; authorize again")
		return
	}
	e := h.pipelineError(r.Context(), err)
	switch e.Code {
	case tollgate.CodeMalformedCredential:
		edge.Deny(w)
		return
	case tollgate.CodeNoCredential:
		message := "no credential: send an API key in the x-api-key header (or as Authorization: Bearer)"
		if h.verify != nil {
			message += ", or authorize with OAuth"
		}
		h.unauthorized(w, r, id, false, e.Code.String(), message)
		return
	case tollgate.CodeUnauthorized:
		h.unauthorized(w, r, id, true, e.Code.String(),
			"unauthorized: no API key has this value; check the key in the client's configuration (a rotated key's old value stops working at once)")
		return
	}
	hdr := w.Header()
	h.door.CORS(hdr, r)
	a := answerOf(e.Code)
	code := a.rpc
	if code == codeInvalidParams || code == 0 {
		code = codeInternal // a refusal of the request as a whole: the service's failure
	}
	writeRPCError(w, a.status, id, code, e.Code.String(), e.Message)
}

// unauthorized answers 401 with the challenge that sends OAuth clients to the
// resource metadata; invalid marks a credential that was refused (RFC 6750
// error="invalid_token") rather than missing.
func (h *Handler) unauthorized(w http.ResponseWriter, r *http.Request, id []byte, invalid bool, name, message string) {
	hdr := w.Header()
	h.door.CORS(hdr, r)
	ch := h.challenge
	if invalid {
		ch += `, error="invalid_token"`
	}
	hdr.Set("WWW-Authenticate", ch)
	writeRPCError(w, http.StatusUnauthorized, id, CodeUnauthorized, name, message)
}

// hostAllowed is the DNS-rebinding check: a request that arrives on a loopback socket
// must name a loopback host, unless it comes from a trusted proxy, which forwards the
// public name it was asked for. (The SDK's own check cannot tell a proxy on the same
// host from a rebound browser, so it is off.)
func (h *Handler) hostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopback(local.String()) {
		return true
	}
	return isLoopback(r.Host) || h.door.Edge().FromTrustedProxy(r)
}

// isLoopback reports whether a host, with or without a port, is localhost or a
// loopback address.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
