// Package admin is an optional http.Handler for operators: create accounts and keys,
// read an account with its balance and keys, rotate and revoke keys, and grant or take
// away credits. It is protected by a bearer admin token, compared in constant time.
//
// Routes, relative to where the host mounts the handler (JSON in, the envelope out):
//
//	POST /admin/v1/accounts                        {"id"?, "plan", "credits"?, "apis"?, "channels"?, "allowed_ips"?, "expires_at"?}
//	GET  /admin/v1/accounts/{account_id}
//	POST /admin/v1/accounts/{account_id}/keys      {"name", "apis"?, "channels"?, "allowed_ips"?, "expires_at"?}
//	POST /admin/v1/keys/{key_id}/rotate
//	POST /admin/v1/keys/{key_id}/revoke
//	POST /admin/v1/accounts/{account_id}/credits   {"amount", "reason"}
//	GET  /admin/v1/accounts/{account_id}/audit     ?limit=&cursor=&from=&to=
//
// The audit route lists the account's audit log newest first (with tollgate.Options.Audit
// set; else 404): limit 1 to 1000 (default 50), cursor the "next" of the page before,
// from and to RFC 3339 instants (from <= at < to). Every change made through this
// handler is recorded with the actor "operator" and the client's address: the TCP peer,
// or, when the peer is one of [Options.TrustedProxies], the client that its
// X-Forwarded-For names (read as the REST front door reads it, auth.ClientAddr).
//
// Key values appear only in the responses that create them (data.value): at account
// creation, sub-key creation and rotation. They are never stored, so they cannot be read
// again. The optional restriction fields of an account creation apply to the whole
// account; every key of the account is confined within them. A credits request may carry
// an Idempotency-Key header so that a retried grant applies once; a key that is reused
// returns the current balance and changes nothing, whatever the amount.
//
// Mount it on a separate listener or behind network controls where possible:
//
//	mux.Handle("/admin/", adminHandler)
package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/envelope"
	"github.com/tollgate-dev/tollgate/rest"
)

// MinTokenLength is the shortest admin token [NewHandler] accepts.
const MinTokenLength = 16

// maxBody caps an admin request body.
const maxBody = 64 << 10

// Options configures the admin handler. The zero value is the default; every field is
// optional.
type Options struct {
	// TrustedProxies lists the addresses of reverse proxies whose X-Forwarded-For
	// header is believed, for the address the audit log records for a change. By default
	// none is: the address is the TCP peer, and an X-Forwarded-For header is ignored.
	// List the proxies in front of the admin API, the same as rest.Options'.
	TrustedProxies []netip.Prefix
}

// Handler serves the admin API. Create it with [NewHandler].
type Handler struct {
	svc     *tollgate.Service
	token   [sha256.Size]byte
	mux     *http.ServeMux
	trusted []netip.Prefix
}

// NewHandler returns the admin API of svc, protected by token, which callers send as
// "Authorization: Bearer <token>". The token must be at least [MinTokenLength]
// characters. opts may be nil.
func NewHandler(svc *tollgate.Service, token string, opts *Options) (*Handler, error) {
	if svc == nil {
		return nil, errors.New("admin: NewHandler needs a Service")
	}
	if len(token) < MinTokenLength {
		return nil, fmt.Errorf("admin: the admin token needs at least %d characters", MinTokenLength)
	}
	if opts == nil {
		opts = &Options{}
	}
	h := &Handler{svc: svc, token: sha256.Sum256([]byte(token)), mux: http.NewServeMux(),
		trusted: slices.Clone(opts.TrustedProxies)}
	for _, rt := range []struct {
		method, path string
		serve        http.HandlerFunc
	}{
		{http.MethodPost, "/admin/v1/accounts", h.createAccount},
		{http.MethodGet, "/admin/v1/accounts/{account_id}", h.getAccount},
		{http.MethodPost, "/admin/v1/accounts/{account_id}/keys", h.createKey},
		{http.MethodPost, "/admin/v1/keys/{key_id}/rotate", h.rotateKey},
		{http.MethodPost, "/admin/v1/keys/{key_id}/revoke", h.revokeKey},
		{http.MethodPost, "/admin/v1/accounts/{account_id}/credits", h.adjustCredits},
		{http.MethodGet, "/admin/v1/accounts/{account_id}/audit", h.auditLog},
	} {
		h.mux.HandleFunc(rt.method+" "+rt.path, rt.serve)
		// Another method on a route's path is a 405, not the catch-all's 404: the
		// ServeMux would answer 405 itself only if no pattern (the catch-all below)
		// matched the path.
		allow := rt.method
		if allow == http.MethodGet {
			allow += ", " + http.MethodHead
		}
		h.mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			envelope.WriteError(w, http.StatusMethodNotAllowed, r.URL.Path+" takes "+allow+", not "+r.Method)
		})
	}
	h.mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		envelope.WriteError(w, http.StatusNotFound, "no admin route "+r.Method+" "+r.URL.Path)
	})
	return h, nil
}

// ServeHTTP checks the admin token, then routes the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-admin"`)
		envelope.WriteError(w, http.StatusUnauthorized, "send the admin token as Authorization: Bearer <token>")
		return
	}
	actor := tollgate.Actor{ID: audit.Operator, Addr: auth.ClientAddr(r, h.trusted)}
	h.mux.ServeHTTP(w, r.WithContext(tollgate.WithActor(r.Context(), actor)))
}

// authorized compares the bearer token with the admin token in constant time. Both are
// hashed first, so the comparison does not depend on their lengths either.
func (h *Handler) authorized(r *http.Request) bool {
	v := r.Header.Get("Authorization")
	if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(v[7:])))
	return subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
}

// restrictionFields are the optional restriction fields of accounts and keys.
type restrictionFields struct {
	APIs       []string   `json:"apis"`
	Channels   []string   `json:"channels"`
	AllowedIPs []string   `json:"allowed_ips"`
	ExpiresAt  *time.Time `json:"expires_at"`
}

func (f restrictionFields) build() (auth.Restrictions, error) {
	return auth.NewRestrictions(auth.RestrictionSpec{
		APIs: f.APIs, Channels: f.Channels, AllowedIPs: f.AllowedIPs, ExpiresAt: f.ExpiresAt,
	})
}

func (h *Handler) createAccount(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID      string `json:"id"`
		Plan    string `json:"plan"`
		Credits *int64 `json:"credits"`
		restrictionFields
	}
	if !decode(w, r, &body) {
		return
	}
	rs, err := body.build()
	if err != nil {
		writeError(w, err)
		return
	}
	acct, key, value, err := h.svc.CreateAccount(r.Context(), tollgate.AccountSpec{
		ID: body.ID, Plan: body.Plan, Credits: body.Credits, Restrictions: rs,
	})
	if err != nil {
		writeError(w, err)
		return
	}
	write(w, http.StatusCreated, map[string]any{"account": accountJSON(acct), "key": keyJSON(key), "value": value})
}

func (h *Handler) getAccount(w http.ResponseWriter, r *http.Request) {
	info, err := h.svc.Account(r.Context(), r.PathValue("account_id"))
	if err != nil {
		writeError(w, err)
		return
	}
	keys := make([]map[string]any, len(info.Keys))
	for i, k := range info.Keys {
		keys[i] = keyJSON(k)
	}
	write(w, http.StatusOK, map[string]any{
		"account": accountJSON(info.Account), "balance": balanceJSON(info.Balance), "keys": keys,
	})
}

func (h *Handler) createKey(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
		restrictionFields
	}
	if !decode(w, r, &body) {
		return
	}
	rs, err := body.build()
	if err != nil {
		writeError(w, err)
		return
	}
	key, value, err := h.svc.CreateKey(r.Context(), r.PathValue("account_id"), auth.NewKey{Name: body.Name, Restrictions: rs})
	if err != nil {
		writeError(w, err)
		return
	}
	write(w, http.StatusCreated, map[string]any{"key": keyJSON(key), "value": value})
}

func (h *Handler) rotateKey(w http.ResponseWriter, r *http.Request) {
	key, value, err := h.svc.RotateKey(r.Context(), r.PathValue("key_id"))
	if err != nil {
		writeError(w, err)
		return
	}
	write(w, http.StatusOK, map[string]any{"key": keyJSON(key), "value": value})
}

func (h *Handler) revokeKey(w http.ResponseWriter, r *http.Request) {
	key, err := h.svc.RevokeKey(r.Context(), r.PathValue("key_id"))
	if err != nil {
		writeError(w, err)
		return
	}
	write(w, http.StatusOK, map[string]any{"key": keyJSON(key)})
}

func (h *Handler) adjustCredits(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Amount *int64 `json:"amount"`
		Reason string `json:"reason"`
	}
	if !decode(w, r, &body) {
		return
	}
	if body.Amount == nil || *body.Amount == 0 {
		envelope.WriteError(w, http.StatusBadRequest, "amount is required: a positive number grants credits, a negative one takes them away")
		return
	}
	if strings.TrimSpace(body.Reason) == "" || len(body.Reason) > 500 {
		envelope.WriteError(w, http.StatusBadRequest, "reason is required (at most 500 characters): say why the balance changes")
		return
	}
	idem := r.Header.Get("Idempotency-Key")
	if len(idem) > 255 {
		envelope.WriteError(w, http.StatusBadRequest, "the Idempotency-Key header is longer than 255 characters")
		return
	}
	b, err := h.svc.AdjustCredits(r.Context(), r.PathValue("account_id"), *body.Amount, body.Reason, idem)
	if err != nil {
		writeError(w, err)
		return
	}
	write(w, http.StatusOK, map[string]any{"balance": balanceJSON(b)})
}

// maxCursor bounds the cursor parameter of the audit route; a cursor is far shorter.
const maxCursor = 64

func (h *Handler) auditLog(w http.ResponseWriter, r *http.Request) {
	q := audit.Query{Account: r.PathValue("account_id")}
	params := r.URL.Query()
	for name := range params {
		if name != "limit" && name != "cursor" && name != "from" && name != "to" {
			envelope.WriteError(w, http.StatusBadRequest, fmt.Sprintf("unknown parameter %q: the audit route takes limit, cursor, from and to", name))
			return
		}
		if len(params[name]) > 1 {
			envelope.WriteError(w, http.StatusBadRequest, fmt.Sprintf("parameter %q is given more than once", name))
			return
		}
	}
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxLimit {
			envelope.WriteError(w, http.StatusBadRequest, fmt.Sprintf("limit must be a whole number from 1 to %d", audit.MaxLimit))
			return
		}
		q.Limit = n
	}
	if q.Cursor = params.Get("cursor"); len(q.Cursor) > maxCursor {
		envelope.WriteError(w, http.StatusBadRequest, "cursor is not one a page of the audit log returned: pass its next as it is")
		return
	}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if v := params.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				envelope.WriteError(w, http.StatusBadRequest, p.name+" must be an RFC 3339 instant, for example 2030-01-15T12:00:00Z")
				return
			}
			*p.t = t
		}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		envelope.WriteError(w, http.StatusBadRequest, "from must be before to")
		return
	}
	page, err := h.svc.AuditLog(r.Context(), q)
	if err != nil {
		writeError(w, err)
		return
	}
	entries := make([]map[string]any, len(page.Entries))
	for i, e := range page.Entries {
		entries[i] = auditJSON(e)
	}
	var next any
	if page.Next != "" {
		next = page.Next
	}
	write(w, http.StatusOK, map[string]any{"entries": entries, "next": next})
}

func auditJSON(e audit.Entry) map[string]any {
	m := map[string]any{
		"at": e.At, "actor": e.Actor, "action": e.Action, "account": e.Account,
		"target": nil, "before": e.Before, "after": e.After, "credits": nil, "address": nil, "reason": nil,
	}
	if e.Target != "" {
		m["target"] = e.Target
	}
	if e.Action == audit.CreditsAdjust || e.Credits != 0 {
		m["credits"] = e.Credits
	}
	if e.Addr.IsValid() {
		m["address"] = e.Addr.String()
	}
	if e.Reason != "" {
		m["reason"] = e.Reason
	}
	return m
}

// decode reads a JSON object body into v, refusing unknown fields. On failure it has
// written the response.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			envelope.WriteError(w, http.StatusUnsupportedMediaType, "send the body as application/json")
			return false
		}
	}
	d := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			envelope.WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxBody))
		case err == io.EOF:
			envelope.WriteError(w, http.StatusBadRequest, "the request needs a JSON object body")
		default:
			envelope.WriteError(w, http.StatusBadRequest, "the body is not a valid request: "+err.Error())
		}
		return false
	}
	if _, err := d.Token(); err != io.EOF {
		envelope.WriteError(w, http.StatusBadRequest, "the body must hold one JSON object and nothing after it")
		return false
	}
	return true
}

func write(w http.ResponseWriter, status int, data any) {
	b, err := envelope.Encode(data)
	if err != nil {
		envelope.WriteError(w, http.StatusInternalServerError, "internal error")
		return
	}
	envelope.WriteData(w, status, b)
}

// writeError writes a service error with the status of its code.
func writeError(w http.ResponseWriter, err error) {
	var e *tollgate.Error
	switch {
	case errors.As(err, &e):
		envelope.WriteError(w, rest.Status(e.Code), e.Message)
	case errors.Is(err, auth.ErrInvalid):
		envelope.WriteError(w, http.StatusBadRequest, err.Error())
	default:
		envelope.WriteError(w, http.StatusInternalServerError, "internal error")
	}
}

func accountJSON(a auth.Account) map[string]any {
	m := map[string]any{"id": a.ID, "plan": a.Plan, "created_at": a.CreatedAt}
	addRestrictions(m, a.Restrictions)
	return m
}

func keyJSON(k auth.Key) map[string]any {
	m := map[string]any{
		"id": k.ID, "account": k.AccountID, "name": k.Name, "primary": k.Primary,
		"created_at": k.CreatedAt, "revoked": k.Revoked(),
	}
	if !k.RotatedAt.IsZero() {
		m["rotated_at"] = k.RotatedAt
	}
	if k.Revoked() {
		m["revoked_at"] = k.RevokedAt
	}
	addRestrictions(m, k.Restrictions)
	return m
}

func addRestrictions(m map[string]any, r auth.Restrictions) {
	s := r.Spec()
	m["apis"], m["channels"], m["allowed_ips"] = orEmpty(s.APIs), orEmpty(s.Channels), orEmpty(s.AllowedIPs)
	m["expires_at"] = s.ExpiresAt
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func balanceJSON(b billing.Balance) map[string]any {
	return map[string]any{"remaining": b.Remaining, "used": b.Used, "limit": b.Allowance, "renewal": b.Period.End}
}
