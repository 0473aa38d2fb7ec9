package oauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store"
)

// An authzRequest is a validated authorization request, with its defaults filled in.
type authzRequest struct {
	clientID    string
	redirectURI string
	state       string
	challenge   string
	resource    string
	scope       string
}

// fields returns the request as the consent form's hidden fields, in a fixed order.
func (q *authzRequest) fields() []field {
	return []field{
		{"response_type", "code"},
		{"client_id", q.clientID},
		{"redirect_uri", q.redirectURI},
		{"state", q.state},
		{"code_challenge", q.challenge},
		{"code_challenge_method", "S256"},
		{"resource", q.resource},
		{"scope", q.scope},
	}
}

// A requestError is an authorization request that cannot be completed. It is shown
// to the person on a page of the server, never sent to the client's redirect URI: no
// redirect URI is trusted before the person has seen it on the consent page (see the
// package doc).
type requestError struct {
	status int
	msg    string // a sentence for the page
}

func (e *requestError) Error() string { return e.msg }

// refuseRequest returns the requestError of an invalid request parameter, naming the
// OAuth error code (RFC 6749 section 4.1.2.1) that the client's developer looks for.
func refuseRequest(code, format string, args ...any) *requestError {
	return &requestError{http.StatusBadRequest,
		fmt.Sprintf("The application sent an authorization request that cannot be completed (%s): %s.", code, fmt.Sprintf(format, args...))}
}

// authzParams are the parameters of an authorization request; none may repeat.
var authzParams = []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "resource", "scope"}

// checkRequest validates an authorization request: the client, its redirect URI, then
// every other parameter. Its errors are a *requestError, or any other error when the
// store cannot be read.
func (s *Server) checkRequest(r *http.Request, v url.Values) (authzRequest, clientInfo, error) {
	for _, name := range authzParams {
		if len(v[name]) > 1 {
			return authzRequest{}, clientInfo{}, refuseRequest("invalid_request", "it repeats the parameter %s", name)
		}
	}
	q := authzRequest{clientID: v.Get("client_id"), redirectURI: v.Get("redirect_uri")}
	c, err := s.client(r.Context(), q.clientID)
	if errors.Is(err, errClientRefused) {
		return q, c, &requestError{http.StatusBadRequest, "The application cannot connect: " + strings.TrimPrefix(err.Error(), errClientRefused.Error()+": ") + "."}
	}
	if err != nil {
		return q, c, err
	}
	if q.redirectURI == "" {
		if len(c.redirectURIs) != 1 {
			return q, c, refuseRequest("invalid_request", "it has no redirect_uri, and the application registered several")
		}
		q.redirectURI = c.redirectURIs[0]
	}
	if err := matchRedirectURI(c.redirectURIs, q.redirectURI); err != nil {
		return q, c, &requestError{http.StatusBadRequest, "The application cannot connect: the " + err.Error() + "."}
	}

	if q.state = v.Get("state"); len(q.state) > maxState {
		return q, c, refuseRequest("invalid_request", "state is longer than %d bytes", maxState)
	}
	switch rt := v.Get("response_type"); rt {
	case "code":
	case "":
		return q, c, refuseRequest("invalid_request", "response_type is required; send response_type=code")
	default:
		return q, c, refuseRequest("unsupported_response_type", "only response_type=code is supported")
	}
	q.challenge = v.Get("code_challenge")
	switch method := v.Get("code_challenge_method"); {
	case q.challenge == "":
		return q, c, refuseRequest("invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256")
	case method != "S256":
		return q, c, refuseRequest("invalid_request", "code_challenge_method must be S256; plain and absent methods are not supported")
	case !validChallenge(q.challenge):
		return q, c, refuseRequest("invalid_request", "code_challenge must be the 43-character base64url SHA-256 of the code verifier")
	}
	if res := v.Get("resource"); res == "" {
		q.resource = s.resources[0]
	} else if q.resource, _ = s.resource(res); q.resource == "" {
		return q, c, refuseRequest("invalid_target", "the resource %q is not protected by this authorization server", truncate(res, 200))
	}
	if q.scope = v.Get("scope"); len(q.scope) > maxScope || !cleantext.Printable(q.scope) {
		return q, c, refuseRequest("invalid_scope", "scope must be printable text of at most %d bytes", maxScope)
	}
	return q, c, nil
}

// serveAuthorize serves the authorization endpoint: it validates the request and shows
// the consent page.
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.RawQuery) > maxBodyBytes {
		s.writeErrorPage(w, http.StatusRequestURITooLong, "The authorization request is too long.")
		return
	}
	q, c, err := s.checkRequest(r, r.URL.Query())
	if err != nil {
		s.requestFailed(w, r, err)
		return
	}
	consent, nonce := newConsent(s.now().Add(ConsentTTL))
	http.SetCookie(w, s.cookie.make(consent.id, nonce, ConsentTTL))
	s.writePage(w, http.StatusOK, s.consentPage(r, q, c, consent.token(nonce, &q), ""))
}

// serveConsent receives the consent form.
func (s *Server) serveConsent(w http.ResponseWriter, r *http.Request) {
	if !s.fromConsentPage(r) {
		s.writeErrorPage(w, http.StatusForbidden, "The consent form must be submitted from the consent page itself.")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		s.writeErrorPage(w, http.StatusUnsupportedMediaType, "The consent form must be sent as a form.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		s.writeErrorPage(w, http.StatusBadRequest, "The consent form cannot be read.")
		return
	}
	form := r.PostForm
	q, c, err := s.checkRequest(r, form)
	if err != nil {
		s.requestFailed(w, r, err)
		return
	}
	now := s.now()
	token := form.Get("consent")
	nonce, ok := s.checkConsent(r, token, &q, now)
	if !ok {
		s.writeErrorPage(w, http.StatusForbidden, "This consent form has expired, or was not opened in this browser.")
		return
	}
	switch form.Get("action") {
	case "approve":
	case "deny":
		// The person saw on the consent page where the application returns to, and
		// chose to go back there.
		http.SetCookie(w, s.cookie.clear(consentID(token)))
		s.redirect(w, q, url.Values{"error": {"access_denied"}, "error_description": {"the user denied the request"}})
		return
	default:
		s.writeErrorPage(w, http.StatusBadRequest, "The consent form has no decision.")
		return
	}

	addr := s.edge.Addr(r)
	var keyID, accountID string
	if value := strings.TrimSpace(form.Get("api_key")); value != "" {
		keyID, accountID, err = s.keys.ApproveKey(r.Context(), value, addr)
	} else if id, ok := s.loginKey(r); ok {
		keyID = id
		accountID, err = s.keys.ApproveKeyID(r.Context(), id, addr)
	} else {
		err = fmt.Errorf("%w: enter your API key", ErrKeyRefused)
	}
	if errors.Is(err, ErrKeyRefused) {
		s.writePage(w, http.StatusForbidden, s.consentPage(r, q, c, token, "The key cannot approve this connection: "+strings.TrimPrefix(err.Error(), ErrKeyRefused.Error()+": ")+"."))
		return
	}
	if err != nil {
		s.failed(r.Context(), "oauth: checking a key on the consent page", "error", err)
		s.writeErrorPage(w, http.StatusServiceUnavailable, "The key cannot be checked right now. Try again in a moment.")
		return
	}

	code := newSecret(codePrefix)
	a := oauthstore.Approval{
		ID:        approvalID(nonce),
		ClientID:  c.id,
		KeyID:     keyID,
		AccountID: accountID,
		Resource:  q.resource,
		Scopes:    []string{Scope},
		CreatedAt: now,
		ExpiresAt: now.Add(ConsentTTL), // outlives the form, so that its id stays taken
	}
	cr := oauthstore.Code{Hash: oauthstore.HashSecret(code), ApprovalID: a.ID, RedirectURI: q.redirectURI, Challenge: q.challenge, ExpiresAt: now.Add(CodeTTL)}
	switch err := s.store.CreateApproval(r.Context(), a, cr); {
	case errors.Is(err, store.ErrConflict):
		s.writeErrorPage(w, http.StatusConflict, "This consent form was submitted already.")
		return
	case err != nil:
		s.failed(r.Context(), "oauth: storing an approval", "error", err)
		s.writeErrorPage(w, http.StatusServiceUnavailable, "The approval cannot be stored right now. Try again in a moment.")
		return
	}
	s.purge(r.Context(), now)
	http.SetCookie(w, s.cookie.clear(consentID(token)))
	s.redirect(w, q, url.Values{"code": {code}})
}

// fromConsentPage reports whether a submission of the consent form may come from the
// consent page: a browser names the site a request comes from in Sec-Fetch-Site, and
// the page's is same-origin ("none" is the person's own doing, such as a reload). A
// page of another site may not decide for the person, not even a sibling site, which
// can plant a consent cookie of its own (cookies may be set for a parent domain) and
// so pass the form's check. A browser too old to send Sec-Fetch-Site still names the
// origin of a form's POST in Origin, which must then be the server's own (the issuer's
// scheme, with its host or the request's); "null", sent from a sandboxed or opaque page, is another
// site's. A request with neither header relies on the form's check alone.
func (s *Server) fromConsentPage(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" || u.User != nil {
		return false
	}
	return strings.EqualFold(u.Scheme, s.issuerURL.Scheme) &&
		(strings.EqualFold(u.Host, s.issuerURL.Host) || strings.EqualFold(u.Host, r.Host))
}

// loginKey asks the host's Login hook, if any, which key the person is logged in with.
func (s *Server) loginKey(r *http.Request) (string, bool) {
	if s.login == nil {
		return "", false
	}
	id, ok := s.login(r)
	return id, ok && id != ""
}

// consentPage returns the consent page of a valid request.
func (s *Server) consentPage(r *http.Request, q authzRequest, c clientInfo, token, errMsg string) pageData {
	d := pageData{
		Form:        true,
		Error:       errMsg,
		ClientName:  cleantext.Message(c.name), // a name stored by an earlier version may hold formatting characters
		ClientID:    c.id,
		Document:    c.document,
		Resource:    q.resource,
		RedirectURI: q.redirectURI,
		Fields:      append(q.fields(), field{"consent", token}),
	}
	if d.ClientName == "" {
		d.ClientName = "An unnamed application"
	}
	// Both URIs were validated: they parse.
	redirect, _ := url.Parse(q.redirectURI)
	d.RedirectHost = redirect.Host
	_, d.Loopback = loopbackBase(q.redirectURI)
	if doc, err := url.Parse(c.id); c.document && err == nil {
		d.ClientHost = doc.Host
		d.HostsDiffer = !d.Loopback && !strings.EqualFold(doc.Hostname(), redirect.Hostname())
	}
	d.LoginKeyID, _ = s.loginKey(r)
	return d
}

// requestFailed answers an authorization request that cannot be completed, on a page
// of the server.
func (s *Server) requestFailed(w http.ResponseWriter, r *http.Request, err error) {
	var re *requestError
	if errors.As(err, &re) {
		s.writeErrorPage(w, re.status, re.msg)
		return
	}
	s.failed(r.Context(), "oauth: reading a client", "error", err)
	s.writeErrorPage(w, http.StatusServiceUnavailable, "The application cannot be looked up right now. Try again in a moment.")
}

// redirect sends the browser to the request's redirect URI with params, the state and
// the issuer (RFC 9207) added to its query. The URI is the validated one, kept as it
// is, so that its own query is retained byte for byte (RFC 6749 section 3.1.2).
func (s *Server) redirect(w http.ResponseWriter, q authzRequest, params url.Values) {
	v := url.Values{}
	for k, vs := range params {
		v[k] = vs
	}
	if q.state != "" {
		v.Set("state", q.state)
	}
	v.Set("iss", s.issuer)
	sep := "&"
	switch {
	case !strings.Contains(q.redirectURI, "?"):
		sep = "?"
	case strings.HasSuffix(q.redirectURI, "?"):
		sep = ""
	}
	s.setPageHeaders(w.Header())
	w.Header().Set("Location", q.redirectURI+sep+v.Encode())
	w.WriteHeader(http.StatusSeeOther)
}

// A consent binds a consent form to the browser that opened it and to the request it
// shows. The browser gets a random nonce in a cookie named after the consent's id; the
// form carries the id, the expiry and an HMAC of both and of every request parameter,
// keyed with the nonce. A cross-site page can neither read the form nor set the
// cookie, so it cannot approve on the person's behalf; and the form cannot be replayed
// for another request. The approval's id is derived from the nonce, so a form is
// accepted once: a second submission collides with the approval of the first.
type consent struct {
	id      string // names the cookie; several consent pages may be open at once
	expires time.Time
}

// newConsent returns a new consent and its nonce.
func newConsent(expires time.Time) (consent, []byte) {
	var b [6 + 32]byte
	rand.Read(b[:])
	return consent{id: hex.EncodeToString(b[:6]), expires: expires.Truncate(time.Second)}, b[6:]
}

// token returns the form's consent field: id.expiry.mac.
func (c consent) token(nonce []byte, q *authzRequest) string {
	exp := strconv.FormatInt(c.expires.Unix(), 10)
	return c.id + "." + exp + "." + base64.RawURLEncoding.EncodeToString(c.mac(nonce, q))
}

// mac authenticates the consent and the request with the nonce.
func (c consent) mac(nonce []byte, q *authzRequest) []byte {
	m := hmac.New(sha256.New, nonce)
	var n [8]byte
	write := func(s string) { // length-prefixed, so that no two requests collide
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		m.Write(n[:])
		m.Write([]byte(s))
	}
	write("tollgate oauth consent v1")
	write(c.id)
	write(strconv.FormatInt(c.expires.Unix(), 10))
	for _, f := range q.fields() {
		write(f.Name)
		write(f.Value)
	}
	return m.Sum(nil)
}

// consentID returns the id part of a consent token.
func consentID(token string) string {
	id, _, _ := strings.Cut(token, ".")
	return id
}

// checkConsent verifies the consent token of a submitted form against the browser's
// cookie and the request, and returns the nonce.
func (s *Server) checkConsent(r *http.Request, token string, q *authzRequest, now time.Time) ([]byte, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[0]) != 12 {
		return nil, false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return nil, false
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, false
	}
	ck, err := r.Cookie(s.cookie.name(parts[0]))
	if err != nil {
		return nil, false
	}
	nonce, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || len(nonce) != 32 {
		return nil, false
	}
	c := consent{id: parts[0], expires: time.Unix(exp, 0)}
	return nonce, hmac.Equal(mac, c.mac(nonce, q))
}

// approvalID returns the id of the approval a consent with this nonce creates.
func approvalID(nonce []byte) string {
	sum := sha256.Sum256(append([]byte("tollgate oauth approval\x00"), nonce...))
	return "apv_" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// cookieAttrs are the attributes of the consent cookies.
type cookieAttrs struct {
	prefix string
	path   string
	secure bool
}

// newCookieAttrs returns the attributes of the consent cookies of an issuer served
// over https (secure) or, for local development, http. Over https a cookie is __Host-
// prefixed, which a browser accepts only from the issuer's own host (Secure, Path=/,
// no Domain): a sibling site cannot plant one for the parent domain to pass a form of
// its own making. Over http, where the prefix is not available, it is kept to the
// authorization endpoint's path.
func newCookieAttrs(secure bool) cookieAttrs {
	if secure {
		return cookieAttrs{prefix: "__Host-tollgate_consent_", path: "/", secure: true}
	}
	return cookieAttrs{prefix: "tollgate_consent_", path: "/oauth/authorize"}
}

func (a cookieAttrs) name(id string) string { return a.prefix + id }

// make returns the cookie holding a consent's nonce.
func (a cookieAttrs) make(id string, nonce []byte, ttl time.Duration) *http.Cookie {
	return &http.Cookie{
		Name:     a.name(id),
		Value:    base64.RawURLEncoding.EncodeToString(nonce),
		Path:     a.path,
		MaxAge:   int(ttl / time.Second),
		HttpOnly: true,
		Secure:   a.secure,
		SameSite: http.SameSiteStrictMode,
	}
}

// clear returns the cookie that deletes a consent's cookie.
func (a cookieAttrs) clear(id string) *http.Cookie {
	c := a.make(id, nil, 0)
	c.MaxAge = -1
	return c
}
