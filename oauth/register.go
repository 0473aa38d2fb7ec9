package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
)

// Bounds of untrusted input.
const (
	maxBodyBytes     = 16 << 10 // a registration, token, revocation or consent request
	maxURI           = 2048     // a redirect URI, resource or client_id URL
	maxRedirectURIs  = 10
	maxClientName    = 200 // bytes
	maxState         = 1024
	maxScope         = 1024
	maxDocumentBytes = 5 << 10 // a client metadata document
)

// metadata is the client metadata of a registration request (RFC 7591 section 2) or of
// a client metadata document. Fields the server does not use are ignored, as RFC 7591
// requires; the body as a whole is bounded.
type metadata struct {
	ClientID                string   `json:"client_id"`
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	Scope                   string   `json:"scope"`
}

// A metadataError is an invalid registration, with its RFC 7591 error code.
type metadataError struct {
	code string // invalid_redirect_uri or invalid_client_metadata
	msg  string
}

func (e *metadataError) Error() string { return e.msg }

func badMetadata(format string, args ...any) error {
	return &metadataError{"invalid_client_metadata", fmt.Sprintf(format, args...)}
}

// validate checks the metadata that a client is registered with and normalizes it.
// Every client is public: a token_endpoint_auth_method other than "none" is refused
// only when strict is set (metadata documents); a registration request gets "none"
// instead, as RFC 7591 section 3.2.1 allows.
func (m *metadata) validate(strict bool) error {
	if len(m.RedirectURIs) == 0 {
		return &metadataError{"invalid_redirect_uri", "redirect_uris is required: list the URIs the client receives codes at"}
	}
	if len(m.RedirectURIs) > maxRedirectURIs {
		return &metadataError{"invalid_redirect_uri", fmt.Sprintf("redirect_uris has %d URIs, more than the %d allowed", len(m.RedirectURIs), maxRedirectURIs)}
	}
	for _, u := range m.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return &metadataError{"invalid_redirect_uri", err.Error()}
		}
	}
	if len(m.ClientName) > maxClientName {
		return badMetadata("client_name is longer than %d bytes", maxClientName)
	}
	if !cleantext.Printable(m.ClientName) {
		return badMetadata("client_name must be %s", cleantext.PrintableRule)
	}
	switch m.TokenEndpointAuthMethod {
	case "", "none":
	default:
		if strict {
			return badMetadata("token_endpoint_auth_method %q is not supported; clients are public (\"none\") and use PKCE", truncate(m.TokenEndpointAuthMethod, 40))
		}
	}
	m.TokenEndpointAuthMethod = "none"
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return badMetadata("grant_types may hold only authorization_code and refresh_token, not %q", truncate(g, 40))
		}
	}
	m.GrantTypes = []string{"authorization_code", "refresh_token"}
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			return badMetadata("response_types may hold only code, not %q", truncate(rt, 40))
		}
	}
	m.ResponseTypes = []string{"code"}
	if len(m.Scope) > maxScope {
		return badMetadata("scope is longer than %d bytes", maxScope)
	}
	return nil
}

// decodeJSON decodes the one JSON value that r holds into v: data after it, other than
// white space, is an error.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		return err
	}
	switch _, err := dec.Token(); {
	case err == io.EOF:
		return nil
	case err == nil:
		return errors.New("data after the JSON value")
	default:
		return err
	}
}

// truncate shortens s to about n bytes, for messages that repeat input.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// serveRegister serves dynamic client registration (RFC 7591).
func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	if s.registry != nil && !s.registry.AllowN(now, 1) {
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusTooManyRequests, "temporarily_unavailable", "too many client registrations; try again in a minute")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusBadRequest, "invalid_client_metadata", "send the client metadata as application/json")
		return
	}
	var m metadata
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, maxBodyBytes), &m); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_client_metadata", fmt.Sprintf("the client metadata is larger than %d bytes", maxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_client_metadata", "the client metadata is not a valid JSON object")
		return
	}
	if err := m.validate(false); err != nil {
		e := err.(*metadataError)
		writeError(w, http.StatusBadRequest, e.code, e.msg)
		return
	}
	c := oauthstore.Client{ID: newSecret(clientPrefix), Name: m.ClientName, RedirectURIs: m.RedirectURIs, CreatedAt: now}
	if err := s.store.CreateClient(r.Context(), c); err != nil {
		s.storeFailed(w, r, "creating a client", err)
		return
	}
	s.purge(r.Context(), now)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id":                  c.ID,
		"client_id_issued_at":        now.Unix(),
		"client_name":                c.Name,
		"redirect_uris":              c.RedirectURIs,
		"grant_types":                m.GrantTypes,
		"response_types":             m.ResponseTypes,
		"token_endpoint_auth_method": m.TokenEndpointAuthMethod,
		"scope":                      Scope,
	})
}

// writeError writes an OAuth error response (RFC 6749 section 5.2).
func writeError(w http.ResponseWriter, status int, code, description string) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

// storeFailed answers a request whose store operation failed unexpectedly, and logs
// the failure.
func (s *Server) storeFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.failed(r.Context(), "oauth: store failed", "op", what, "error", err)
	w.Header().Set("Retry-After", "5")
	writeError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the authorization server cannot complete the request now; try again")
}
