package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
)

// A LoginField is one field of the host's own sign-in form (see [Options.LoginFields]).
type LoginField struct {
	// Name is the form field's name, which the host's Login reads from the request:
	// letters, digits, _, - and ., at most 64 characters, not api_key nor csrf_token.
	Name string
	// Label is what the person reads next to the field.
	Label string
	// Type is "text" (the default), "email" or "password". A password is never put
	// back in the form after a refusal; the other fields are.
	Type string
	// Autocomplete is the field's autocomplete token ("username",
	// "current-password", "one-time-code"); by default "username" for text and email
	// fields and "current-password" for a password.
	Autocomplete string
}

// loginForm is the host's sign-in form, when the session handler has a Login.
type loginForm struct {
	On     bool
	Title  string
	Fields []LoginField
}

var loginFieldName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

// newLoginForm checks the host's sign-in fields against the session handler.
func newLoginForm(sessions Sessions, fields []LoginField, title string) (loginForm, error) {
	if !sessions.HasLogin() {
		if len(fields) > 0 {
			return loginForm{}, errors.New("dashboard: Options.LoginFields is set, but the session handler has no Login (session.Options.Login)")
		}
		return loginForm{}, nil
	}
	f := loginForm{On: true, Title: title}
	if f.Title == "" {
		f.Title = "Sign in with your account"
	}
	var names []string
	for _, lf := range fields {
		switch {
		case !loginFieldName.MatchString(lf.Name) || lf.Name == "api_key" || lf.Name == CSRFField:
			return loginForm{}, fmt.Errorf("dashboard: Options.LoginFields: the name %q must be letters, digits, _, - and ., starting with a letter, at most 64 characters, and not api_key or %s", lf.Name, CSRFField)
		case slices.Contains(names, lf.Name):
			return loginForm{}, fmt.Errorf("dashboard: Options.LoginFields: %q is given twice", lf.Name)
		case strings.TrimSpace(lf.Label) == "":
			return loginForm{}, fmt.Errorf("dashboard: Options.LoginFields: %q has no label", lf.Name)
		}
		switch lf.Type {
		case "":
			lf.Type = "text"
		case "text", "email", "password":
		default:
			return loginForm{}, fmt.Errorf("dashboard: Options.LoginFields: %q has the type %q; use text, email or password", lf.Name, lf.Type)
		}
		if lf.Autocomplete == "" {
			lf.Autocomplete = "username"
			if lf.Type == "password" {
				lf.Autocomplete = "current-password"
			}
		}
		names = append(names, lf.Name)
		f.Fields = append(f.Fields, lf)
	}
	return f, nil
}

// signInData is the sign-in page: the key form, and the host's form if it has one.
type signInData struct {
	Login loginForm
	// Values are the host's fields as the refused form had them, passwords left out.
	Values map[string]string
	// LoginError marks the error as the host form's, for aria-invalid.
	LoginError bool
}

// renderSignIn renders the sign-in page with v's notice or error; post is the host
// form's refused post, or nil.
func (h *Handler) renderSignIn(w http.ResponseWriter, r *http.Request, status int, v *view, post url.Values) {
	v.Title = "Sign in"
	d := signInData{Login: h.login, Values: map[string]string{}, LoginError: post != nil}
	for _, f := range h.login.Fields {
		if f.Type != "password" {
			d.Values[f.Name] = post.Get(f.Name)
		}
	}
	v.Data = d
	h.render(w, r, status, "sign-in", v)
}

// signInLogin starts a session through the host's Login, which reads the form's
// fields. A refusal shows the Login's message; a Login that fails otherwise shows a
// message that says nothing of the failure (the session handler logs it).
func (h *Handler) signInLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.renderSignIn(w, r, http.StatusBadRequest, &view{Error: "The form is not valid or is larger than 64 KiB."}, url.Values{})
		return
	}
	if _, err := h.sessions.SignInWithLogin(w, r); err != nil {
		setRetryAfter(w, err)
		status, msg := statusOf(err)
		if tollgate.CodeOf(err) == tollgate.CodeUnauthorized {
			msg = "You were not signed in: " + strings.TrimPrefix(msg, accounts.ErrLoginRefused.Error()+": ")
		}
		h.renderSignIn(w, r, status, &view{Error: msg}, r.PostForm)
		return
	}
	seeOther(w, "./")
}
