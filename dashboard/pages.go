package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
)

// overviewData is what the overview shows: the figures of GET /v1/analytics (plan,
// credits, renewal, limits) and the chart of the last 30 days.
type overviewData struct {
	Plan                   string
	Used, Remaining, Limit int64
	// Granted and AllowanceLeft are the two parts of Remaining: the grants, which carry
	// over, and what is left of the period's allowance, which renews. Lapse is when the
	// next grant lapses (zero: none does), with Lapsing credits.
	Granted, AllowanceLeft, Lapsing int64
	Lapse                           time.Time
	Renewal                         time.Time
	RatePerMinute, RateBurst        int
	Concurrency                     int
	// KeyName is the key the session acts as; empty for a session of the whole account.
	KeyName string
	Primary bool
	Usage   usageChart
}

// overview serves the overview page.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request, v *visit) {
	acct, err := h.mgr.OwnAccount(r.Context(), v.Caller)
	if err != nil {
		h.failed(w, r, v, err)
		return
	}
	b := acct.Balance
	d := overviewData{Plan: acct.Plan.Name, Used: b.Used, Remaining: b.Remaining, Limit: b.Allowance,
		Granted: b.Granted, AllowanceLeft: b.AllowanceLeft(), Lapse: b.GrantsLapse, Lapsing: b.GrantsLapsing,
		Renewal: b.Period.End, Concurrency: acct.Plan.Concurrency, KeyName: acct.Caller.Name, Primary: acct.Caller.Primary}
	if l, ok := acct.Plan.RateLimit(); ok {
		d.RatePerMinute, d.RateBurst = l.Rate, l.Burst
	}
	if d.Usage, err = h.lastDays(r, v); err != nil {
		h.failed(w, r, v, err)
		return
	}
	page := v.view("Overview", "overview")
	page.Data = d
	h.render(w, r, http.StatusOK, "overview", page)
}

// keyRow is one row of the keys table.
type keyRow struct {
	ID, Name                 string
	Primary, Current         bool
	APIs, Channels, IPs      string
	Created, LastUsed, Until time.Time
	// State is "active", "expired" or "revoked".
	State                string
	CanRotate, CanRevoke bool
}

// choice is a checkbox of the form that creates a key.
type choice struct {
	Value   string
	Checked bool
}

// keyForm is what the form that creates a key was filled with, kept when the service
// refuses it so that the person can fix it.
type keyForm struct {
	Name, IPs, Expires string
	APIs, Channels     []choice
}

// keysData is the keys page.
type keysData struct {
	Keys []keyRow
	Form keyForm
	// Next is the link to the next page of keys; empty on the last. Paged is set on a
	// page after the first.
	Next  string
	Paged bool
}

// keysPageSize is the number of keys a page of the keys page shows.
const keysPageSize = auth.DefaultKeyPage

// keyNames returns the names of the keys the session may see, by id, for the pages
// that name keys (the audit log, usage by key): those of the first
// [auth.MaxKeyPage] keys, oldest first; a key after them is shown by its id. It is
// empty if the keys cannot be read.
func (h *Handler) keyNames(r *http.Request, v *visit) map[string]string {
	names := map[string]string{}
	if page, err := h.mgr.OwnKeys(r.Context(), v.Caller, auth.KeyQuery{Limit: auth.MaxKeyPage}); err == nil {
		for _, k := range page.Keys {
			names[k.ID] = k.Name
		}
	}
	return names
}

// keys serves the keys page.
func (h *Handler) keys(w http.ResponseWriter, r *http.Request, v *visit) {
	h.renderKeys(w, r, v, v.view("Keys", "keys"), http.StatusOK, h.newForm(nil))
}

// renderKeys renders the keys page with the form given: the page of keys that ?cursor=
// names on a GET, the first page after a post.
func (h *Handler) renderKeys(w http.ResponseWriter, r *http.Request, v *visit, page *view, status int, form keyForm) {
	var cursor string
	if r.Method == http.MethodGet {
		cursor = r.URL.Query().Get("cursor")
	}
	keys, err := h.mgr.OwnKeys(r.Context(), v.Caller, auth.KeyQuery{After: cursor, Limit: keysPageSize})
	if tollgate.CodeOf(err) == tollgate.CodeInvalidInput && cursor != "" {
		// A cursor whose key was deleted since, or one made up: the first page.
		seeOther(w, "keys")
		return
	}
	if err != nil {
		h.failed(w, r, v, err)
		return
	}
	if id := r.URL.Query().Get("revoked"); id != "" && r.Method == http.MethodGet {
		if k, err := h.mgr.OwnKey(r.Context(), v.Caller, id); err == nil && k.Revoked() {
			page.Notice = "The key " + k.Name + " is revoked: the next call made with it is refused."
		}
	}
	now := h.svc.Now()
	d := keysData{Form: form, Paged: cursor != ""}
	if keys.Next != "" {
		d.Next = "keys?" + url.Values{"cursor": {keys.Next}}.Encode()
	}
	last := keys.LastUsed
	for _, k := range keys.Keys {
		s := k.Restrictions.Spec()
		row := keyRow{ID: k.ID, Name: k.Name, Primary: k.Primary, Current: k.ID == v.Claims.KeyID,
			APIs: listOr(s.APIs, "all APIs"), Channels: listOr(s.Channels, "all channels"),
			IPs: listOr(s.AllowedIPs, "any address"), Created: k.CreatedAt, LastUsed: last[k.ID],
			Until: k.Restrictions.ExpiresAt(), State: "active"}
		switch {
		case k.Revoked():
			row.State = "revoked"
		case k.Restrictions.Expired(now):
			row.State = "expired"
		}
		row.CanRotate = !k.Revoked() && !v.suspended
		row.CanRevoke = !k.Revoked() && !k.Primary
		d.Keys = append(d.Keys, row)
	}
	page.Data = d
	h.render(w, r, status, "keys", page)
}

// listOr joins a list, or says what an empty one means.
func listOr(items []string, empty string) string {
	if len(items) == 0 {
		return empty
	}
	return strings.Join(items, ", ")
}

// newForm returns the form that creates a key, filled from a post (nil for an empty
// form).
func (h *Handler) newForm(post url.Values) keyForm {
	f := keyForm{Name: post.Get("name"), IPs: post.Get("allowed_ips"), Expires: post.Get("expires")}
	for _, a := range h.svc.Catalog().List() {
		f.APIs = append(f.APIs, choice{Value: a.ID, Checked: slices.Contains(post["api"], a.ID)})
	}
	for _, c := range auth.ChannelNames() {
		f.Channels = append(f.Channels, choice{Value: c, Checked: slices.Contains(post["channel"], c)})
	}
	return f
}

// secretData is the page that shows a new key's value, once.
type secretData struct {
	Name, ID, Value string
	Rotated         bool
	// Current is set when the session was started with the rotated key, which ends it.
	Current bool
}

// createKey creates a sub-key from the form and shows its value, this once.
func (h *Handler) createKey(w http.ResponseWriter, r *http.Request, v *visit) {
	form := h.newForm(r.PostForm)
	spec, problem := restrictionsOf(r.PostForm)
	var (
		key   auth.Key
		value string
		err   error
	)
	if problem == "" {
		rs, rerr := auth.NewRestrictions(spec)
		if rerr != nil {
			problem = rerr.Error()
		} else {
			key, value, err = h.mgr.CreateOwnKey(r.Context(), v.Caller, accounts.NewKey{Name: strings.TrimSpace(form.Name), Restrictions: rs})
		}
	}
	status := http.StatusBadRequest
	if err != nil {
		if c := tollgate.CodeOf(err); c == tollgate.CodeUnauthorized || c == tollgate.CodeUnavailable || c == tollgate.CodeInternal {
			h.failed(w, r, v, err)
			return
		}
		status, problem = statusOf(err)
	}
	if problem != "" {
		page := v.view("Keys", "keys")
		page.Error = "The key was not created: " + problem
		h.renderKeys(w, r, v, page, status, form)
		return
	}
	page := v.view("Your new key", "keys")
	page.Data = secretData{Name: key.Name, ID: key.ID, Value: value}
	h.render(w, r, http.StatusCreated, "secret", page)
}

// restrictionsOf reads the restrictions of the form that creates a key, or says what
// is wrong with them.
func restrictionsOf(f url.Values) (auth.RestrictionSpec, string) {
	spec := auth.RestrictionSpec{APIs: f["api"], Channels: f["channel"]}
	spec.AllowedIPs = strings.FieldsFunc(f.Get("allowed_ips"), func(r rune) bool {
		return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t'
	})
	if e := strings.TrimSpace(f.Get("expires")); e != "" {
		t, err := time.Parse("2006-01-02", e)
		if err != nil {
			return spec, "expiry: give a date as YYYY-MM-DD"
		}
		spec.ExpiresAt = &t
	}
	return spec, ""
}

// confirmData is a page that asks to confirm a rotation or a revocation.
type confirmData struct {
	Key     keyRow
	Current bool
}

// ownKey returns the key that ?key= (or the form's key_id) names, if the session may
// see it, or answers 404.
func (h *Handler) ownKey(w http.ResponseWriter, r *http.Request, v *visit, id string) (auth.Key, bool) {
	k, err := h.mgr.OwnKey(r.Context(), v.Caller, id)
	switch code := tollgate.CodeOf(err); {
	case err == nil:
		return k, true
	case code != tollgate.CodeNotFound && code != tollgate.CodeInvalidInput:
		h.failed(w, r, v, err)
		return auth.Key{}, false
	}
	page := v.view("Key not found", "keys")
	page.Message, page.Link, page.LinkText = "Your account has no key with this id that you may manage.", "keys", "Go to the keys"
	h.render(w, r, http.StatusNotFound, "message", page)
	return auth.Key{}, false
}

// confirm serves the page that asks to confirm an action on the key ?key= names.
func (h *Handler) confirm(w http.ResponseWriter, r *http.Request, v *visit, action string) {
	k, ok := h.ownKey(w, r, v, r.URL.Query().Get("key"))
	if !ok {
		return
	}
	title := "Rotate the key " + k.Name
	if action == "revoke" {
		title = "Revoke the key " + k.Name
	}
	page := v.view(title, "keys")
	page.Data = confirmData{Key: keyRow{ID: k.ID, Name: k.Name, Primary: k.Primary}, Current: k.ID == v.Claims.KeyID}
	h.render(w, r, http.StatusOK, action, page)
}

func (h *Handler) confirmRotate(w http.ResponseWriter, r *http.Request, v *visit) {
	h.confirm(w, r, v, "rotate")
}

func (h *Handler) confirmRevoke(w http.ResponseWriter, r *http.Request, v *visit) {
	h.confirm(w, r, v, "revoke")
}

// rotate rotates the key of the form and shows its new value, this once.
func (h *Handler) rotate(w http.ResponseWriter, r *http.Request, v *visit) {
	key, value, err := h.mgr.RotateOwnKey(r.Context(), v.Caller, r.PostForm.Get("key_id"))
	if err != nil {
		h.failed(w, r, v, err)
		return
	}
	page := v.view("The key's new value", "keys")
	page.Data = secretData{Name: key.Name, ID: key.ID, Value: value, Rotated: true, Current: key.ID == v.Claims.KeyID}
	h.render(w, r, http.StatusOK, "secret", page)
}

// revoke revokes the key of the form.
func (h *Handler) revoke(w http.ResponseWriter, r *http.Request, v *visit) {
	key, err := h.mgr.RevokeOwnKey(r.Context(), v.Caller, r.PostForm.Get("key_id"))
	if err != nil {
		h.failed(w, r, v, err)
		return
	}
	seeOther(w, "keys?revoked="+url.QueryEscape(key.ID))
}
