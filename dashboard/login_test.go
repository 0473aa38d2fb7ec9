package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/session"
)

// hostLogin is a host's Login over a user table: ann (password "correct horse") may
// act for acme; the user "outage" stands for a user store that is down.
func hostLogin(_ context.Context, r *http.Request) (string, error) {
	user, password := r.PostFormValue("user"), r.PostFormValue("password")
	switch {
	case user == "outage":
		return "", errors.New("the user database is unreachable")
	case user == "ann" && password == "correct horse":
		return "acme", nil
	}
	return "", fmt.Errorf("%w: the user name or the password is wrong", session.ErrLoginRefused)
}

var loginFields = []dashboard.LoginField{
	{Name: "user", Label: "User name"},
	{Name: "password", Label: "Password", Type: "password"},
}

func TestSignInWithLogin(t *testing.T) {
	e := newEnvWith(t, func(so *session.Options, do *dashboard.Options) {
		so.Login = session.LoginFunc(hostLogin)
		do.LoginFields, do.LoginTitle = loginFields, "Sign in with Acme SSO"
	})
	anon := e.browser(t)
	p := anon.do("GET", "/dashboard/sign-in", nil)
	for _, want := range []string{`<form class="card narrow" method="post" action="login"`, `<h2 id="login-heading">Sign in with Acme SSO</h2>`,
		`<label for="login-user">User name</label>`, `id="login-password" name="password" type="password" autocomplete="current-password"`,
		`id="api_key" name="api_key" type="password"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the sign-in page lacks %q", want)
		}
	}

	tests := []struct {
		name     string
		form     url.Values
		hdr      []string
		status   int
		message  string
		errorLog bool
	}{
		{"refused", url.Values{"user": {"ann"}, "password": {"wrong"}}, nil, http.StatusUnauthorized,
			"You were not signed in: the user name or the password is wrong", false},
		{"outage", url.Values{"user": {"outage"}, "password": {"x"}}, nil, http.StatusServiceUnavailable,
			"The service cannot answer now; try again shortly.", true},
		{"from another site", url.Values{"user": {"ann"}, "password": {"correct horse"}}, []string{"Sec-Fetch-Site", "cross-site"},
			http.StatusForbidden, "a session cannot be started from another origin&#39;s page", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := e.browser(t)
			before := len(e.logs.Records(t))
			p := b.do("POST", "/dashboard/login", tt.form, tt.hdr...)
			if p.status != tt.status || !strings.Contains(p.body, `<p class="error" role="alert">`+tt.message) {
				t.Fatalf("%d, want %d with %q:\n%s", p.status, tt.status, tt.message, p.body)
			}
			if strings.Contains(p.body, "correct horse") || strings.Contains(p.body, `value="x"`) || strings.Contains(p.body, `value="wrong"`) {
				t.Error("the page puts the password back")
			}
			if !strings.Contains(p.body, `name="user" type="text" autocomplete="username" spellcheck="false" maxlength="1024"
      value="`+tt.form.Get("user")+`"`) {
				t.Error("the page does not keep the user name")
			}
			if b.do("GET", "/dashboard/", nil).status != http.StatusSeeOther {
				t.Error("a refused sign-in started a session")
			}
			errs := 0
			for _, r := range e.logs.Records(t)[before:] {
				if r.Level == "ERROR" {
					errs++
				}
			}
			if (errs > 0) != tt.errorLog {
				t.Errorf("%d ERROR records, want some: %v", errs, tt.errorLog)
			}
		})
	}

	b := e.browser(t)
	p = b.do("POST", "/dashboard/login", url.Values{"user": {"ann"}, "password": {"correct horse"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "./" {
		t.Fatalf("a good login: %d %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	p = b.do("GET", "/dashboard/", nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, "<span class=\"who\">Account <strong>acme</strong></span>") {
		t.Errorf("after a good login, the overview: %d\n%s", p.status, p.body)
	}
	if strings.Contains(e.logs.String(), "correct horse") {
		t.Error("the password was logged")
	}
}

func TestSignInWithoutLogin(t *testing.T) {
	e := newEnv(t)
	p := e.browser(t).do("GET", "/dashboard/sign-in", nil)
	if strings.Contains(p.body, `action="login"`) || !strings.Contains(p.body, `action="sign-in"`) {
		t.Errorf("without a Login, the sign-in page offers more than the key form:\n%s", p.body)
	}
	if p := e.browser(t).do("POST", "/dashboard/login", url.Values{"user": {"ann"}}); p.status != http.StatusForbidden {
		t.Errorf("a post to login without a Login: %d, want 403", p.status)
	}
}

func TestLoginFieldsChecked(t *testing.T) {
	e := newEnv(t)
	withLogin, err := session.NewHandler(e.mgr, &session.Options{Login: session.LoginFunc(hostLogin)})
	if err != nil {
		t.Fatal(err)
	}
	without, err := session.NewHandler(e.mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		sessions *session.Handler
		fields   []dashboard.LoginField
		want     string
	}{
		{"fields without a Login", without, loginFields, "no Login"},
		{"api_key", withLogin, []dashboard.LoginField{{Name: "api_key", Label: "Key"}}, "not api_key"},
		{"bad name", withLogin, []dashboard.LoginField{{Name: "a b", Label: "A"}}, "letters, digits"},
		{"twice", withLogin, []dashboard.LoginField{{Name: "a", Label: "A"}, {Name: "a", Label: "B"}}, "twice"},
		{"no label", withLogin, []dashboard.LoginField{{Name: "a"}}, "no label"},
		{"bad type", withLogin, []dashboard.LoginField{{Name: "a", Label: "A", Type: "hidden"}}, "text, email or password"},
	}
	for _, tt := range tests {
		if _, err := dashboard.NewHandler(e.mgr, tt.sessions, &dashboard.Options{LoginFields: tt.fields}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
	if _, err := dashboard.NewHandler(e.mgr, withLogin, nil); err != nil {
		t.Errorf("a Login without fields: %v", err)
	}
	if _, err := dashboard.NewHandler(e.mgr, withLogin, &dashboard.Options{Packages: dashboard.PackageNames{NPMScope: "acme"}}); err == nil {
		t.Error("a bad npm scope is accepted")
	}
}
