// Package mgmtapi is the JSON API that the management front doors share (package admin
// for operators, package selfservice for account holders): reading a JSON request body,
// routing with 405 and 404 answers, the query of an audit listing, the JSON forms of
// accounts, keys, balances and audit entries, and the routes of webhook endpoints
// ([Webhooks]). Key values never appear in these forms, nor a webhook secret but in
// the answers that make one.
package mgmtapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/wire"
)

// MaxBody caps a management request body.
const MaxBody = 64 << 10

// A Route is one route of a management handler.
type Route struct {
	Method, Path string
	Serve        http.HandlerFunc
}

// Mount registers routes on mux, each path answering other methods with 405 and an
// Allow header, and every other path under root with 404 ("no <label> route ...").
func Mount(mux *http.ServeMux, root, label string, routes []Route) {
	allows := map[string]string{}
	var paths []string
	for _, rt := range routes {
		mux.HandleFunc(rt.Method+" "+rt.Path, rt.Serve)
		allow := rt.Method
		if allow == http.MethodGet {
			allow += ", " + http.MethodHead
		}
		if prev, ok := allows[rt.Path]; ok {
			allows[rt.Path] = prev + ", " + allow
			continue
		}
		allows[rt.Path] = allow
		paths = append(paths, rt.Path)
	}
	for _, path := range paths {
		// Another method on a route's path is a 405, not the catch-all's 404: the
		// ServeMux would answer 405 itself only if no pattern (the catch-all below)
		// matched the path.
		allow := allows[path]
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			edge.WriteEnvelopeError(w, http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, r.URL.Path+" takes "+allow+", not "+r.Method)
		})
	}
	mux.HandleFunc(root, func(w http.ResponseWriter, r *http.Request) {
		edge.WriteEnvelopeError(w, http.StatusNotFound, wire.CodeNotFound, "no "+label+" route "+r.Method+" "+r.URL.Path)
	})
}

// RestrictionFields are the optional restriction fields of accounts and keys.
type RestrictionFields struct {
	APIs       []string `json:"apis"`
	Channels   []string `json:"channels"`
	AllowedIPs []string `json:"allowed_ips"`
	ExpiresAt  *Instant `json:"expires_at"`
}

// Build checks the fields and builds the restrictions.
func (f RestrictionFields) Build() (auth.Restrictions, error) {
	spec := auth.RestrictionSpec{APIs: f.APIs, Channels: f.Channels, AllowedIPs: f.AllowedIPs}
	if f.ExpiresAt != nil {
		spec.ExpiresAt = &f.ExpiresAt.Time
	}
	return auth.NewRestrictions(spec)
}

// Decode reads a JSON object body into v, refusing unknown fields, a body larger than
// [MaxBody], one that is not valid UTF-8, and anything after the object. It fails with
// a [*tollgate.Error] that says what is wrong with the body.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return &tollgate.Error{Code: tollgate.CodeUnsupportedMediaType, Message: "send the body as application/json"}
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &tollgate.Error{Code: tollgate.CodeBodyTooLarge, Message: fmt.Sprintf("the body is larger than %d bytes", MaxBody)}
		}
		return Invalid("the body could not be read")
	}
	// encoding/json would replace invalid UTF-8 in strings silently; refuse it instead.
	if !utf8.Valid(body) {
		return Invalid("the body is not valid UTF-8: send text fields (name, ...) as UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		if err == io.EOF {
			return Invalid("the request needs a JSON object body")
		}
		return Invalid(bodyError(v, err))
	}
	if _, err := d.Token(); err != io.EOF {
		return Invalid("the body must hold one JSON object and nothing after it")
	}
	return nil
}

// Invalid is the refusal of a request with a wrong parameter or body: a 400 whose
// message, msg, names what is wrong.
func Invalid(msg string) error {
	return &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: msg}
}

// maxCursor bounds the cursor parameter of a listing; a cursor is far shorter.
const maxCursor = 64

// pageParams reads the parameters of a listing a page at a time: each given at most
// once and named in more (besides limit and cursor), limit a whole number from 1 to
// maxLimit (0 when not given), cursor at most maxCursor bytes. what names the listing
// in the messages ("the audit log"). On failure it returns a message that names the
// parameter.
func pageParams(params url.Values, what string, maxLimit int, more ...string) (limit int, cursor, problem string) {
	names := append([]string{"limit", "cursor"}, more...)
	for name := range params {
		if !slices.Contains(names, name) {
			return 0, "", fmt.Sprintf("unknown parameter %q: a listing of %s takes %s", name, what, strings.Join(names, ", "))
		}
		if len(params[name]) > 1 {
			return 0, "", fmt.Sprintf("parameter %q is given more than once", name)
		}
	}
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return 0, "", fmt.Sprintf("limit must be a whole number from 1 to %d", maxLimit)
		}
		limit = n
	}
	if cursor = params.Get("cursor"); len(cursor) > maxCursor {
		return 0, "", fmt.Sprintf("cursor is not one a page of %s returned: pass its next as it is", what)
	}
	return limit, cursor, ""
}

// AuditQuery reads the parameters of an audit listing (limit, cursor, from, to) into
// a query. On failure it returns a message that names the parameter.
func AuditQuery(params url.Values) (audit.Query, string) {
	var q audit.Query
	var problem string
	if q.Limit, q.Cursor, problem = pageParams(params, "the audit log", audit.MaxLimit, "from", "to"); problem != "" {
		return q, problem
	}
	return q, timeRange(params, "from", "to", &q.From, &q.To)
}

// timeRange reads the parameters named from and to, RFC 3339 instants, into *f and *t
// (left as they are when not given), and checks that f is before t when both are
// given. On failure it returns a message that names the parameter.
func timeRange(params url.Values, from, to string, f, t *time.Time) string {
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{from, f}, {to, t}} {
		if v := params.Get(p.name); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return p.name + " must be an RFC 3339 instant, for example 2030-01-15T12:00:00Z"
			}
			*p.t = at
		}
	}
	if !f.IsZero() && !t.IsZero() && !f.Before(*t) {
		return from + " must be before " + to
	}
	return ""
}

// KeyQuery reads the parameters of a listing of keys (limit, cursor) into a query. On
// failure it returns a message that names the parameter.
func KeyQuery(params url.Values) (auth.KeyQuery, string) {
	var q auth.KeyQuery
	var problem string
	q.Limit, q.After, problem = pageParams(params, "keys", auth.MaxKeyPage)
	return q, problem
}

// AuditPageJSON is the JSON form of a page of the audit log.
func AuditPageJSON(page audit.Page) map[string]any {
	entries := make([]map[string]any, len(page.Entries))
	for i, e := range page.Entries {
		entries[i] = AuditJSON(e)
	}
	return map[string]any{"entries": entries, "next": Nullable(page.Next)}
}

// Nullable is s, or JSON null for "".
func Nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// AuditJSON is the JSON form of an audit entry.
func AuditJSON(e audit.Entry) map[string]any {
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

// AccountJSON is the JSON form of an account: billing_anchor null for an account with
// no anchor (its periods are calendar months), pending_plan and pending_plan_at null
// when no change of plan waits for a renewal.
func AccountJSON(a auth.Account) map[string]any {
	m := map[string]any{"id": a.ID, "plan": a.Plan, "created_at": a.CreatedAt,
		"billing_anchor": nullTime(a.BillingAnchor), "pending_plan": Nullable(a.PendingPlan), "pending_plan_at": nil}
	if a.PendingPlan != "" {
		m["pending_plan_at"] = a.PendingPlanAt.UTC()
	}
	addRestrictions(m, a.Restrictions)
	addState(m, a)
	return m
}

// nullTime is t in UTC, or JSON null for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

// KeyJSON is the JSON form of a key: never its value nor its hash.
func KeyJSON(k auth.Key) map[string]any {
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

// KeysJSON is the JSON form of a list of keys.
func KeysJSON(keys []auth.Key) []map[string]any {
	out := make([]map[string]any, len(keys))
	for i, k := range keys {
		out[i] = KeyJSON(k)
	}
	return out
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

// BalanceJSON is the JSON form of a balance: remaining, and its two parts, granted (the
// grants, which carry over) and allowance_remaining (what is left of the period's
// allowance, which renews); used, limit (the allowance) and renewal; and next_lapse,
// {"at", "credits"}, when a grant lapses, else null.
func BalanceJSON(b billing.Balance) map[string]any {
	var lapse any
	if !b.GrantsLapse.IsZero() {
		lapse = map[string]any{"at": b.GrantsLapse, "credits": b.GrantsLapsing}
	}
	return map[string]any{"remaining": b.Remaining, "granted": b.Granted, "allowance_remaining": b.AllowanceLeft(),
		"used": b.Used, "limit": b.Allowance, "renewal": b.Period.End, "next_lapse": lapse}
}

// BalanceSchema is the JSON Schema of [BalanceJSON]'s form, for the OpenAPI documents.
func BalanceSchema() map[string]any {
	integer := func(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }
	return map[string]any{"type": "object", "required": []string{"remaining", "granted", "allowance_remaining", "used", "limit", "renewal", "next_lapse"},
		"properties": map[string]any{
			"remaining":           integer("Credits left: allowance_remaining plus granted."),
			"granted":             integer("The part of remaining that grants hold: credits given or bought, which carry over when the allowance renews, until they are spent or lapse."),
			"allowance_remaining": integer("What is left of the period's allowance, which renews at renewal."),
			"used":                integer("Credits spent this period, from either part."),
			"limit":               integer("The plan's allowance for a period."),
			"renewal":             map[string]any{"type": "string", "format": "date-time", "description": "When the allowance renews; grants carry over."},
			"next_lapse": map[string]any{"type": []string{"object", "null"}, "description": "The earliest expiry among the grants, and the credits that lapse then; null when none lapses.",
				"properties": map[string]any{"at": map[string]any{"type": "string", "format": "date-time"}, "credits": map[string]any{"type": "integer"}},
				"required":   []string{"at", "credits"}},
		}}
}
