package dashboard_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/session"
)

// TestMCPPage: the MCP page gives the endpoint's URL from the request's host, or from
// Options.PublicURL, and snippets for each client with a placeholder for the key and
// with OAuth; never a key's value, and never text of a forged Host header.
func TestMCPPage(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	b.signIn(e.key)
	p := b.do("GET", "/dashboard/mcp", nil)
	if p.status != http.StatusOK {
		t.Fatalf("mcp: %d\n%s", p.status, p.body)
	}
	body := html.UnescapeString(p.body)
	u := e.srv.URL + "/v1/mcp"
	for _, want := range []string{`aria-current="page">MCP`, `value="` + u + `"`,
		"claude mcp add --transport http tollgate '" + u + "' --header 'x-api-key: YOUR_API_KEY'",
		`"url": "` + u + `"`, `"x-api-key": "${input:tollgate-key}"`, `"mcp-remote"`, "npx @modelcontextprotocol/inspector --cli '" + u + "'",
		"Claude Desktop", "Cursor", "VS Code", "MCP Inspector", "With OAuth"} {
		if !strings.Contains(body, want) {
			t.Errorf("the MCP page lacks %q", want)
		}
	}
	if strings.Contains(p.body, e.key) {
		t.Error("the MCP page shows the key's value")
	}
	if strings.Count(body, "x-api-key") < 5 || strings.Count(body, "YOUR_API_KEY") < 4 {
		t.Error("not every client's key snippet has the header placeholder")
	}

	u0, _ := url.Parse(e.srv.URL)
	cookies := b.c.Jar.Cookies(u0)

	// Options.PublicURL; without it, a forged Host header cannot put text of its own
	// into the commands.
	sessH, err := session.NewHandler(e.mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"ftp://x", "api.example.com", "https://u:p@api.example.com", "https://api.example.com/?q=1"} {
		if _, err := dashboard.NewHandler(e.mgr, sessH, &dashboard.Options{PublicURL: bad}); err == nil {
			t.Errorf("PublicURL %q was accepted", bad)
		}
	}
	dash, err := dashboard.NewHandler(e.mgr, sessH, &dashboard.Options{PublicURL: "https://api.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/mcp", nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	dash.ServeHTTP(w, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `value="https://api.example.com/v1/mcp"`) {
		t.Errorf("with PublicURL: %d\n%s", w.Code, w.Body.String())
	}
	r = httptest.NewRequest("GET", "/mcp", nil)
	r.Host = "evil.example';rm -rf ~;'"
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w = httptest.NewRecorder()
	noURL, err := dashboard.NewHandler(e.mgr, sessH, nil)
	if err != nil {
		t.Fatal(err)
	}
	noURL.ServeHTTP(w, r)
	if got := html.UnescapeString(w.Body.String()); w.Code != http.StatusOK || strings.Contains(got, "rm -rf") ||
		!strings.Contains(got, "http://YOUR_TOLLGATE_HOST/v1/mcp") {
		t.Errorf("a forged Host: %d\n%s", w.Code, got)
	}
}
