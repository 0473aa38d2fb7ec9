package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store"
)

// A Grant is what a valid access token grants: acting for one API key, through one
// client, at one resource, until ExpiresAt.
type Grant struct {
	// KeyID is the stable id of the API key the token acts for. The resource server
	// authenticates the key by this id on every call, so that a rotation of the key
	// keeps the connection and a revocation ends it.
	KeyID string
	// AccountID is the key's account.
	AccountID string
	// ClientID is the client the token was issued to.
	ClientID string
	// Resource is the token's audience.
	Resource string
	// Scopes are the scopes granted.
	Scopes []string
	// ExpiresAt is when the access token expires.
	ExpiresAt time.Time
}

// VerifyAccessToken returns what an access token grants at resource. It returns an
// error wrapping [ErrInvalidToken] if the token is malformed, unknown, expired, revoked
// or issued for another resource, and any other error if the store cannot be read.
//
// It checks the token only: the caller authenticates Grant.KeyID with the service
// (a tollgate.Caller with its KeyID) on every call, which refuses a revoked key.
func (s *Server) VerifyAccessToken(ctx context.Context, token, resource string) (Grant, error) {
	if !secretShaped(token, accessPrefix) {
		return Grant{}, fmt.Errorf("%w: not an access token of this server", ErrInvalidToken)
	}
	t, a, err := s.store.Token(ctx, oauthstore.HashSecret(token), s.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Grant{}, fmt.Errorf("%w: unknown, expired or revoked", ErrInvalidToken)
	case err != nil:
		return Grant{}, fmt.Errorf("oauth: reading an access token: %w", err)
	case t.Kind != oauthstore.AccessToken:
		return Grant{}, fmt.Errorf("%w: not an access token", ErrInvalidToken)
	}
	if res, ok := s.resource(resource); !ok || res != a.Resource {
		return Grant{}, fmt.Errorf("%w: issued for another resource", ErrInvalidToken)
	}
	return Grant{
		KeyID:     a.KeyID,
		AccountID: a.AccountID,
		ClientID:  a.ClientID,
		Resource:  a.Resource,
		Scopes:    slices.Clone(a.Scopes),
		ExpiresAt: t.ExpiresAt,
	}, nil
}

// A tokenError is an error answer of the token or revocation endpoint.
type tokenError struct {
	status int
	code   string
	msg    string
}

func (e *tokenError) Error() string { return e.msg }

func invalidGrant(format string, args ...any) *tokenError {
	return &tokenError{http.StatusBadRequest, "invalid_grant", fmt.Sprintf(format, args...)}
}

func invalidRequest(format string, args ...any) *tokenError {
	return &tokenError{http.StatusBadRequest, "invalid_request", fmt.Sprintf(format, args...)}
}

// errUnavailable answers a request that failed in the store or in Keys.
var errUnavailable = &tokenError{http.StatusServiceUnavailable, "temporarily_unavailable", "the authorization server cannot complete the request now; try again"}

// readForm reads the form body of a token or revocation request and authenticates the
// client, which is public: it names itself with client_id and has no secret.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, *tokenError) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return nil, invalidRequest("send the parameters as application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		return nil, invalidRequest("the request body cannot be read, or is larger than %d bytes", maxBodyBytes)
	}
	form := r.PostForm
	for name, vs := range form {
		if len(vs) > 1 {
			return nil, invalidRequest("the parameter %q is repeated", truncate(name, 40))
		}
	}
	if r.Header.Get("Authorization") != "" || form.Get("client_secret") != "" {
		return nil, &tokenError{http.StatusUnauthorized, "invalid_client", "clients of this server are public: send client_id in the body, without a secret"}
	}
	return form, nil
}

// serveToken serves the token endpoint.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	form, terr := readForm(w, r)
	if terr == nil {
		for _, name := range []string{"grant_type", "client_id"} {
			if form.Get(name) == "" {
				terr = invalidRequest("%s is required", name)
				break
			}
		}
	}
	if terr == nil {
		switch gt := form.Get("grant_type"); gt {
		case "authorization_code":
			terr = s.exchangeCode(w, r, form)
		case "refresh_token":
			terr = s.refresh(w, r, form)
		default:
			terr = &tokenError{http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("grant_type %q is not supported; use authorization_code or refresh_token", truncate(gt, 40))}
		}
	}
	if terr != nil {
		writeError(w, terr.status, terr.code, terr.msg)
	}
}

// exchangeCode serves the authorization_code grant. It checks the exchange against a
// read of the code first, and redeems the code only when every check passed. An
// exchange of a live code with the wrong client, redirect URI or verifier comes from
// someone who holds the code without being its client: it burns the code (revokes its
// approval, which has no tokens yet). Other refusals (a malformed request, a resource
// that is not the grant's, a key that may no longer approve) leave the code as it is.
// Redeeming a code that was redeemed before is a replay: the store revokes the
// approval, and with it every token the code gave.
func (s *Server) exchangeCode(w http.ResponseWriter, r *http.Request, form url.Values) *tokenError {
	for _, name := range []string{"code", "redirect_uri", "code_verifier"} {
		if form.Get(name) == "" {
			return invalidRequest("%s is required", name)
		}
	}
	code, verifier := form.Get("code"), form.Get("code_verifier")
	if !validVerifier(verifier) {
		return invalidRequest("code_verifier must be 43 to 128 unreserved characters")
	}
	if err := checkRedirectURI(form.Get("redirect_uri")); err != nil {
		return invalidRequest("%v", err)
	}
	if !secretShaped(code, codePrefix) {
		return invalidGrant("the code is not one this server issued")
	}
	ctx, now, h := r.Context(), s.now(), oauthstore.HashSecret(code)
	c, a, err := s.store.Code(ctx, h, now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return invalidGrant("the code is unknown, expired or revoked")
	case err != nil:
		return s.unavailable(ctx, "reading a code", err)
	}
	var wrong string
	switch {
	case form.Get("client_id") != a.ClientID:
		wrong = "the code was issued to another client"
	case form.Get("redirect_uri") != c.RedirectURI:
		wrong = "redirect_uri differs from the one of the authorization request"
	case !verifierMatches(verifier, c.Challenge):
		wrong = "code_verifier does not match the code_challenge"
	}
	if wrong != "" {
		if c.Redeemed {
			// The client it was issued to has its tokens: someone who saw the code
			// later spoils nothing.
			return invalidGrant("%s", wrong)
		}
		// Whoever sent it holds the code but is not the client that asked for it:
		// the code is burnt, as RFC 9700 favours, so that it is no longer worth
		// guessing a verifier for, and the client must ask again.
		s.log.LogAttrs(ctx, slog.LevelInfo, "oauth: an authorization code was presented by someone other than its client; its approval is revoked",
			slog.String("approval", a.ID), slog.String("client_id", a.ClientID), slog.String("why", wrong))
		s.revoke(ctx, a.ID, now)
		return invalidGrant("%s; the code can no longer be used: authorize again", wrong)
	}
	if terr := s.checkGrant(ctx, form, &a); terr != nil {
		return terr
	}
	_, a, err = s.store.RedeemCode(ctx, h, now)
	switch {
	case errors.Is(err, store.ErrConflict):
		s.log.LogAttrs(ctx, slog.LevelInfo, "oauth: an authorization code was redeemed twice; its approval is revoked", slog.String("approval", a.ID), slog.String("client_id", a.ClientID))
		return invalidGrant("the code was used before; every token issued with it is revoked")
	case errors.Is(err, store.ErrNotFound):
		return invalidGrant("the code is unknown, expired or revoked")
	case err != nil:
		return s.unavailable(ctx, "redeeming a code", err)
	}
	access, refresh, tokens := s.mint(a.ID, now)
	switch err := s.store.IssueTokens(ctx, a.ID, tokens, now); {
	case errors.Is(err, store.ErrNotFound):
		return invalidGrant("the authorization was revoked")
	case err != nil:
		return s.unavailable(ctx, "issuing tokens", err)
	}
	s.writeTokens(w, access, refresh)
	return nil
}

// refresh serves the refresh_token grant: it rotates the refresh token. A refresh
// token used a second time was copied, so its approval is revoked.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, form url.Values) *tokenError {
	value := form.Get("refresh_token")
	if value == "" {
		return invalidRequest("refresh_token is required")
	}
	if !secretShaped(value, refreshPrefix) {
		return invalidGrant("the refresh token is not one this server issued")
	}
	ctx, now := r.Context(), s.now()
	h := oauthstore.HashSecret(value)
	t, a, err := s.store.Token(ctx, h, now)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && t.Kind != oauthstore.RefreshToken:
		return invalidGrant("the refresh token is unknown, expired or revoked")
	case err != nil:
		return s.unavailable(ctx, "reading a refresh token", err)
	case form.Get("client_id") != a.ClientID:
		return invalidGrant("the refresh token was issued to another client")
	case t.Used:
		s.revoke(ctx, a.ID, now)
		return invalidGrant("the refresh token was used before; the connection is revoked and must be authorized again")
	}
	if terr := s.checkGrant(ctx, form, &a); terr != nil {
		return terr
	}
	access, refresh, tokens := s.mint(a.ID, now)
	a, err = s.store.RotateToken(ctx, h, tokens, now)
	switch {
	case errors.Is(err, store.ErrConflict):
		s.revoke(ctx, a.ID, now)
		return invalidGrant("the refresh token was used before; the connection is revoked and must be authorized again")
	case errors.Is(err, store.ErrNotFound):
		return invalidGrant("the refresh token is unknown, expired or revoked")
	case err != nil:
		return s.unavailable(ctx, "rotating a refresh token", err)
	}
	s.writeTokens(w, access, refresh)
	return nil
}

// checkGrant checks what both grants check before issuing tokens: the resource, if the
// request names one, and that the key may still be used.
func (s *Server) checkGrant(ctx context.Context, form url.Values, a *oauthstore.Approval) *tokenError {
	if res := form.Get("resource"); res != "" {
		if got, ok := s.resource(res); !ok || got != a.Resource {
			return &tokenError{http.StatusBadRequest, "invalid_target", fmt.Sprintf("the grant is for the resource %q, not %q", a.Resource, truncate(res, 200))}
		}
	}
	switch err := s.keys.CheckKeyID(ctx, a.KeyID); {
	case errors.Is(err, ErrKeyRefused):
		return invalidGrant("the API key behind this connection may no longer be used: %v", strings.TrimPrefix(err.Error(), ErrKeyRefused.Error()+": "))
	case err != nil:
		return s.unavailable(ctx, "checking a key", err)
	}
	return nil
}

// mint returns a new access token and refresh token of an approval, and their records.
func (s *Server) mint(approvalID string, now time.Time) (access, refresh string, tokens []oauthstore.Token) {
	access, refresh = newSecret(accessPrefix), newSecret(refreshPrefix)
	return access, refresh, []oauthstore.Token{
		{Hash: oauthstore.HashSecret(access), ApprovalID: approvalID, Kind: oauthstore.AccessToken, ExpiresAt: now.Add(s.accessTTL)},
		{Hash: oauthstore.HashSecret(refresh), ApprovalID: approvalID, Kind: oauthstore.RefreshToken, ExpiresAt: now.Add(s.refreshTTL)},
	}
}

// writeTokens writes a successful token response (RFC 6749 section 5.1).
func (s *Server) writeTokens(w http.ResponseWriter, access, refresh string) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":  access,
		"token_type":    "Bearer",
		"expires_in":    int64(s.accessTTL / time.Second),
		"refresh_token": refresh,
		"scope":         Scope,
	})
}

// revoke revokes an approval, logging a failure: it is called where a copied refresh
// token shows that the approval's tokens may be in the wrong hands, or a code was
// presented by someone other than its client. The revocation is
// the server's decision: the request's end, if its client leaves, does not cut it
// short.
func (s *Server) revoke(ctx context.Context, approvalID string, now time.Time) {
	ctx = context.WithoutCancel(ctx)
	if err := s.store.RevokeApproval(ctx, approvalID, now); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.ErrorContext(ctx, "oauth: cannot revoke an approval; its tokens (or its code) stay usable until they expire", "approval", approvalID, "error", err)
	}
}

// unavailable logs an unexpected failure and returns the error answer for it.
func (s *Server) unavailable(ctx context.Context, op string, err error) *tokenError {
	s.failed(ctx, "oauth: token endpoint failed", "op", op, "error", err)
	return errUnavailable
}

// serveRevoke serves token revocation (RFC 7009). Revoking either token of a
// connection revokes its approval, and so every token issued from it. Unknown tokens
// are answered with success, as the RFC requires.
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	form, terr := readForm(w, r)
	if terr == nil {
		terr = s.revokeToken(r.Context(), form)
	}
	if terr != nil {
		writeError(w, terr.status, terr.code, terr.msg)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

func (s *Server) revokeToken(ctx context.Context, form url.Values) *tokenError {
	value := form.Get("token")
	if value == "" {
		return invalidRequest("token is required")
	}
	if !secretShaped(value, accessPrefix) && !secretShaped(value, refreshPrefix) {
		return nil
	}
	now := s.now()
	_, a, err := s.store.Token(ctx, oauthstore.HashSecret(value), now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return s.unavailable(ctx, "reading a token to revoke", err)
	case form.Get("client_id") != "" && form.Get("client_id") != a.ClientID:
		return invalidRequest("the token was not issued to this client")
	}
	if err := s.store.RevokeApproval(ctx, a.ID, now); err != nil && !errors.Is(err, store.ErrNotFound) {
		return s.unavailable(ctx, "revoking an approval", err)
	}
	return nil
}
