package dashboard_test

import (
	"html"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/clientgen"
	"github.com/tollgate-dev/tollgate/session"
)

// acme is a brand whose name needs escaping in HTML and JSON.
var acme = brand.Brand{Name: `Acme <i>"Cloud"</i> & Co`, Command: "acme", EnvPrefix: "ACME"}

// TestBrand checks the pages of a dashboard with a brand of its own: the pages'
// titles carry its name, escaped, and so does the Webhooks page's text; the snippets call its command and read its
// variables, and run so in a shell, with the host's command (built as package cli's
// documentation shows) and curl; the packages' examples and the generator's command
// have its names; no page names Tollgate's variables or command.
func TestBrand(t *testing.T) {
	e := newEnvWith(t, func(_ *session.Options, o *dashboard.Options) { o.Brand = acme })
	b := e.browser(t)
	b.signIn(e.key)
	ep, err := e.hooks.Create(t.Context(), event.Actor{ID: "test"}, "acme", "https://example.com/hooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	escaped := html.EscapeString(acme.Name)
	for _, path := range []string{"/dashboard/", "/dashboard/apis", "/dashboard/api?id=hash", "/dashboard/api?id=image-info", "/dashboard/mcp", "/dashboard/keys",
		"/dashboard/usage", "/dashboard/audit", "/dashboard/graphql", "/dashboard/reference", "/dashboard/webhooks", "/dashboard/webhook?id=" + ep.ID} {
		p := b.do("GET", path, nil)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d", path, p.status)
		}
		if !strings.Contains(p.body, " · "+escaped+"</title>") {
			t.Errorf("%s: the title does not end with the brand's name, escaped:\n%.600s", path, p.body)
		}
		if strings.Contains(p.body, acme.Name) {
			t.Errorf("%s: the page has the brand's name unescaped", path)
		}
		for _, leak := range []string{"TOLLGATE", "Tollgate", "tollgate "} {
			if strings.Contains(p.body, leak) {
				i := strings.Index(p.body, leak)
				t.Errorf("%s: the page names %q: …%s…", path, leak, p.body[max(0, i-80):min(len(p.body), i+80)])
			}
		}
	}

	if p := b.do("GET", "/dashboard/webhooks", nil); !strings.Contains(p.body, escaped+" posts your account's events") {
		t.Error("the Webhooks page does not name the service by the brand")
	}

	p := b.do("GET", "/dashboard/api?id=hash", nil)
	if !strings.Contains(p.body, "Set <code>ACME_API_KEY</code> to one of your keys first (<code>export ACME_API_KEY=…</code>") {
		t.Error("the API page does not say to set ACME_API_KEY")
	}
	curl, cli := textarea(t, p, "snippet-curl"), textarea(t, p, "snippet-cli")
	if !strings.Contains(curl, `-H "x-api-key: $ACME_API_KEY"`) {
		t.Errorf("the curl snippet does not read ACME_API_KEY:\n%s", curl)
	}
	if want := "ACME_BASE_URL='" + e.srv.URL + "' acme hash "; !strings.HasPrefix(cli, want) {
		t.Errorf("the command-line snippet is %q, want it to start with %q", cli, want)
	}
	if !strings.Contains(p.body, "-out clients -brand-command &#39;acme&#39; -brand-env &#39;ACME&#39;</pre>") {
		t.Error("the generator's command lacks the brand's flags")
	}
	api, _ := e.svc.Catalog().Lookup("hash")
	examples, err := clientgen.Examples(api, clientgen.Names{BrandCommand: "acme", BrandEnv: "ACME"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		if got := textarea(t, p, "snippet-"+ex.Language); got != ex.Code || !strings.Contains(got, "ACME_API_KEY") {
			t.Errorf("%s: the page's example is not the generator's with the brand, or does not read ACME_API_KEY:\n%s", ex.Language, got)
		}
	}

	mcp := b.do("GET", "/dashboard/mcp", nil)
	for id, want := range map[string][]string{
		"claude-code":    {"claude mcp add --transport http acme '" + e.srv.URL + "/v1/mcp'"},
		"claude-desktop": {`"acme": {`, `"x-api-key:${ACME_API_KEY}"`, `"ACME_API_KEY": "YOUR_API_KEY"`},
		"vscode":         {`"id": "acme-key"`, `"description": "Acme \u003ci\u003e\"Cloud\"\u003c/i\u003e \u0026 Co API key"`, `"${input:acme-key}"`},
	} {
		got := textarea(t, mcp, id+"-key")
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("the %s snippet lacks %s:\n%s", id, w, got)
			}
		}
	}

	// The snippets run as a person pastes them, with the brand's variable only.
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "acme"), "../cli/testdata/acme").CombinedOutput(); err != nil {
		t.Fatalf("building the host's command-line client: %v\n%s", err, out)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Logf("curl is not on PATH (%v): only the command-line snippet runs", err)
		curl = ""
	}
	for _, snippet := range []string{curl, cli} {
		if snippet == "" {
			continue
		}
		cmd := exec.CommandContext(t.Context(), "sh", "-c", snippet)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "ACME_API_KEY="+e.key, "TOLLGATE_API_KEY=", "TOLLGATE_BASE_URL=")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(strings.ReplaceAll(string(out), " ", ""), `"status":"ok"`) {
			t.Errorf("%v\n%s\n%s", err, snippet, out)
		}
	}
}

// TestBrandRefused checks that the dashboard refuses a brand that brand.Check
// refuses, saying what is wrong.
func TestBrandRefused(t *testing.T) {
	e := newEnv(t)
	sessH, err := session.NewHandler(e.mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		b    brand.Brand
		want string
	}{
		{brand.Brand{Name: "Acme", Command: "acme; rm -rf /", EnvPrefix: "ACME"}, `dashboard: Options.Brand: the Command "acme; rm -rf /" is not allowed`},
		{brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME$(id)"}, "dashboard: Options.Brand: the EnvPrefix"},
		{brand.Brand{Name: "Acme\n", Command: "acme", EnvPrefix: "ACME"}, "not printable"},
		{brand.Brand{Name: "Acme"}, "Command"},
		{brand.Brand{Name: "Acme", Command: "validation", EnvPrefix: "ACME"}, `dashboard: Options.Brand: -brand-command "validation" would name the packages' base error class ValidationError`},
	} {
		_, err := dashboard.NewHandler(e.mgr, sessH, &dashboard.Options{Brand: tt.b})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error with %q", tt.b, err, tt.want)
		}
	}
}
