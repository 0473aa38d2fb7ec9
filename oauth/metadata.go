package oauth

import (
	"encoding/json"
	"net/http"
	"net/url"
)

// serveMetadata serves the authorization server metadata (RFC 8414).
func (s *Server) serveMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         s.issuer,
		"authorization_endpoint":                         s.issuer + "/oauth/authorize",
		"token_endpoint":                                 s.issuer + "/oauth/token",
		"registration_endpoint":                          s.issuer + "/oauth/register",
		"revocation_endpoint":                            s.issuer + "/oauth/revoke",
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"code_challenge_methods_supported":               []string{"S256"},
		"scopes_supported":                               []string{Scope},
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
	})
}

// ProtectedResourceMetadata returns the handler of the protected resource metadata
// (RFC 9728) of resource, which must be one of [Options.Resources]; for any other it
// answers 404. The host serves it at [ResourceMetadataPath] of the resource, such as
// /.well-known/oauth-protected-resource/v1/mcp.
func (s *Server) ProtectedResourceMetadata(resource string) http.Handler {
	res, ok := s.resource(resource)
	return cors(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		writeJSON(w, http.StatusOK, map[string]any{
			"resource":                 res,
			"authorization_servers":    []string{s.issuer},
			"scopes_supported":         []string{Scope},
			"bearer_methods_supported": []string{"header"},
			"resource_name":            s.name,
		})
	}))
}

// ResourceMetadataPath returns the path at which the metadata of resource is served
// (RFC 9728 section 3.1): "/.well-known/oauth-protected-resource" followed by the
// resource's path.
func ResourceMetadataPath(resource string) string {
	path := ""
	if u, err := url.Parse(resource); err == nil {
		path = u.EscapedPath()
	}
	if path == "/" {
		path = ""
	}
	return "/.well-known/oauth-protected-resource" + path
}

// ResourceMetadataURL returns the URL of the metadata of resource.
func ResourceMetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + ResourceMetadataPath(resource)
}

// Challenge returns the WWW-Authenticate value of a 401 answer to a request for
// resource without credentials: it points the client at the resource's metadata.
func (s *Server) Challenge(resource string) string {
	return `Bearer resource_metadata="` + ResourceMetadataURL(resource) + `", scope="` + Scope + `"`
}

// InvalidTokenChallenge returns the WWW-Authenticate value of a 401 answer to a request
// for resource whose access token was refused (see [ErrInvalidToken]).
func (s *Server) InvalidTokenChallenge(resource string) string {
	return `Bearer error="invalid_token", error_description="The access token is invalid or expired", resource_metadata="` +
		ResourceMetadataURL(resource) + `", scope="` + Scope + `"`
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
