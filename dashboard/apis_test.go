package dashboard_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/internal/clientgen"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/internal/testserver"
	"github.com/tollgate-dev/tollgate/session"
)

// textarea returns the text of the page's text area with the given id, unescaped.
func textarea(t *testing.T, p page, id string) string {
	t.Helper()
	m := regexp.MustCompile(`<textarea id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)</textarea>`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the page has no text area %s (%d):\n%s", id, p.status, p.body)
	}
	return html.UnescapeString(m[1])
}

// dataValue returns the data-value of the page's element with data-field name.
func dataValue(t *testing.T, p page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`data-field="` + regexp.QuoteMeta(name) + `" data-value="([^"]*)"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the page has no field %s (%d):\n%s", name, p.status, p.body)
	}
	return html.UnescapeString(m[1])
}

// shownEnvelope returns the envelope a try's result shows, compacted.
func shownEnvelope(t *testing.T, p page) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)data-field="envelope"[^>]*>(.*?)</pre>`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the page shows no envelope (%d):\n%s", p.status, p.body)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(html.UnescapeString(m[1]))); err != nil {
		t.Fatalf("the envelope is not JSON: %v\n%s", err, m[1])
	}
	return b.String()
}

// restCall calls an API over REST with a key and the parameters as a query string (GET)
// or form body (POST), and returns the answer.
func (e *env) restCall(t *testing.T, key, api, method string, q url.Values) page {
	t.Helper()
	u, body := e.srv.URL+"/v1/"+api, ""
	if method == http.MethodGet {
		u += "?" + q.Encode()
	} else {
		body = q.Encode()
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{status: res.StatusCode, header: res.Header, body: string(data)}
}

func TestAPIsPage(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	p := b.do("GET", "/dashboard/apis", nil)
	if p.status != http.StatusOK {
		t.Fatalf("apis: %d\n%s", p.status, p.body)
	}
	for _, a := range e.svc.Catalog().List() {
		if !strings.Contains(p.body, `<tr data-api="`+a.ID+`" data-usable="true">`) || !strings.Contains(p.body, `href="api?id=`+a.ID+`"`) {
			t.Errorf("the primary key's list does not offer %s as callable", a.ID)
		}
	}
	if got, want := dataValue(t, p, "usable"), fmt.Sprint(len(e.svc.Catalog().List())); got != want {
		t.Errorf("usable = %s, want all %s", got, want)
	}

	// A sub-key limited to hash over REST sees the others refused, with the reason.
	value, _ := b.createKey(csrf, url.Values{"name": {"hash only"}, "api": {"hash"}, "channel": {"rest"}})
	sub := e.browser(t)
	sub.signIn(value)
	p = sub.do("GET", "/dashboard/apis", nil)
	if !strings.Contains(p.body, `<tr data-api="hash" data-usable="true">`) || !strings.Contains(p.body, "over REST</span>") {
		t.Errorf("the scoped key is not told it may call hash over REST:\n%s", p.body)
	}
	if !strings.Contains(p.body, `<tr data-api="echo" data-usable="false">`) ||
		!strings.Contains(p.body, "the API key may not call echo; it is limited to hash") {
		t.Errorf("the scoped key is not told why it may not call echo:\n%s", p.body)
	}
	if got := dataValue(t, p, "usable"); got != "1" {
		t.Errorf("usable = %s, want 1", got)
	}
	if strings.Contains(p.body, value) || strings.Contains(p.body, e.key) {
		t.Error("the APIs page shows a key value")
	}

	// A key limited to MCP may call everything, but not over REST nor GraphQL.
	mcpOnly, _ := b.createKey(csrf, url.Values{"name": {"mcp only"}, "channel": {"mcp"}})
	m := e.browser(t)
	m.signIn(mcpOnly)
	if p := m.do("GET", "/dashboard/apis", nil); !strings.Contains(p.body, `<tr data-api="hash" data-usable="true">`) ||
		strings.Contains(p.body, "over REST") || !strings.Contains(p.body, "over MCP") {
		t.Errorf("the MCP key is not told it may call over MCP only:\n%s", p.body)
	}
}

func TestAPIPage(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	b.signIn(e.key)
	p := b.do("GET", "/dashboard/api?id=hmac", nil)
	if p.status != http.StatusOK {
		t.Fatalf("api: %d\n%s", p.status, p.body)
	}
	for _, want := range []string{
		`<code data-field="rest">POST /v1/hmac</code>`, `<code data-field="graphql">hmac</code>`, `<code data-field="mcp">hmac</code>`,
		`data-field="cost" data-value="1"`, `<tr data-param="message">`, `<tr data-param="secret">`,
		"at least 1 characters", "one of sha1, sha256, sha512", "<code>sha256</code>", // rules, default
		"is <strong>not charged</strong>", "<strong>is charged</strong>", "<strong>refunded</strong>",
		`<select id="param-2" name="p.algorithm"`, `<option value="" selected>Not sent: the default, sha256</option>`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the hmac page lacks %q", want)
		}
	}
	// The date API's form has a date input with a valid date; the file API a file input.
	if p := b.do("GET", "/dashboard/api?id=date-info", nil); !strings.Contains(p.body, `name="p.date" type="date" value="2024-02-29"`) ||
		!strings.Contains(p.body, `<code data-field="graphql">dateinfo</code>`) {
		t.Errorf("the date-info page has no date input filled with a valid date:\n%s", p.body)
	}
	p = b.do("GET", "/dashboard/api?id=image-info", nil)
	for _, want := range []string{`enctype="multipart/form-data"`, `name="p.image" type="file"`, `name="p.url" type="url"`,
		"FILE_UPLOAD_NOT_SUPPORTED", "at most 5 MiB"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the image-info page lacks %q", want)
		}
	}
	if p := b.do("GET", "/dashboard/api?id=uuid-generator", nil); !strings.Contains(p.body, `type="number" value="" step="1" min="1" max="100"`) {
		t.Errorf("uuid-generator's count is not a bounded number input:\n%s", p.body)
	}
	if p := b.do("GET", "/dashboard/api?id=nope", nil); p.status != http.StatusNotFound {
		t.Errorf("an unknown API: %d, want 404", p.status)
	}
	if strings.Contains(p.body, e.key) {
		t.Error("the API page shows the key's value")
	}
}

// TestSnippets runs the curl and command-line snippets of every API of the sample
// catalog as a person would paste them, in a shell with TOLLGATE_API_KEY set, against
// the server, and checks that each call succeeds; and checks that each package's
// example is the generator's, with the names of Options.Packages.
func TestSnippets(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		testenv.Unavailable(t, "curl is not on PATH: %v", err)
	}
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "tollgate"), "github.com/tollgate-dev/tollgate/cmd/tollgate").CombinedOutput(); err != nil {
		t.Fatalf("building the command-line client: %v\n%s", err, out)
	}
	names := dashboard.PackageNames{GoImport: "example.org/acme/clients", NPMScope: "@acme", JavaPackage: "org.acme.clients"}
	e := newEnvWith(t, func(_ *session.Options, o *dashboard.Options) { o.Packages = names })
	b := e.browser(t)
	b.signIn(e.key)
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "photo.png"), testserver.PNG(t, 7, 5), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(api, snippet string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "sh", "-c", snippet)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "TOLLGATE_API_KEY="+e.key)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s\n%s", api, err, snippet, out)
		}
		return string(out)
	}
	for _, id := range []string{"hash", "hmac", "uuid-generator", "date-info", "echo", "image-info"} {
		p := b.do("GET", "/dashboard/api?id="+id, nil)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d", id, p.status)
		}
		before := e.balance(t)
		curlText := textarea(t, p, "snippet-curl")
		if strings.Contains(curlText, e.key) || !strings.Contains(curlText, `"x-api-key: $TOLLGATE_API_KEY"`) || !strings.Contains(curlText, e.srv.URL+"/v1/"+id) {
			t.Errorf("%s: the curl snippet does not read the key from the environment and call %s:\n%s", id, e.srv.URL, curlText)
		}
		out := run(id, curlText)
		if !strings.HasPrefix(out, "HTTP/1.1 200") || !strings.Contains(out, `{"status":"ok","error":null,"data":`) {
			t.Errorf("%s: the curl snippet got:\n%s\n%s", id, out, curlText)
		}
		cli := textarea(t, p, "snippet-cli")
		if !strings.HasPrefix(cli, "TOLLGATE_BASE_URL='"+e.srv.URL+"' tollgate "+id) {
			t.Errorf("%s: the CLI snippet: %s", id, cli)
		}
		if out := run(id, cli); !strings.Contains(out, `"status": "ok"`) && !strings.Contains(out, `"status":"ok"`) {
			t.Errorf("%s: the CLI snippet got:\n%s\n%s", id, out, cli)
		}
		api, _ := e.svc.Catalog().Lookup(id)
		if after := e.balance(t); after != before-2*api.Cost {
			t.Errorf("%s: the two snippets' calls took %d credits, want 2 × %d", id, before-after, api.Cost)
		}
		examples, err := clientgen.Examples(api, clientgen.Names{GoImport: names.GoImport, NPMScope: names.NPMScope, JavaPackage: names.JavaPackage})
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range examples {
			if got := textarea(t, p, "snippet-"+ex.Language); got != ex.Code {
				t.Errorf("%s %s: the page's example is not the generator's:\n%s\nwant\n%s", id, ex.Language, got, ex.Code)
			}
			if !strings.Contains(p.body, "<code>"+html.EscapeString(ex.Package)+"</code>") {
				t.Errorf("%s %s: the page does not name the package %s", id, ex.Language, ex.Package)
			}
		}
		if !strings.Contains(p.body, "-go-import &#39;example.org/acme/clients&#39; -npm-scope &#39;@acme&#39; -java-package &#39;org.acme.clients&#39;") {
			t.Errorf("%s: the generator's command lacks the names' flags", id)
		}
	}
	// The go example imports the package by the host's import path.
	if p := b.do("GET", "/dashboard/api?id=hash", nil); !strings.Contains(textarea(t, p, "snippet-go"), `"example.org/acme/clients/hash"`) ||
		!strings.Contains(textarea(t, p, "snippet-js"), `from '@acme/hash'`) {
		t.Error("the examples do not use the names of Options.Packages")
	}
	// The file API's URL form, run against a server that serves the image.
	img := imageServer(t)
	p := b.do("GET", "/dashboard/api?id=image-info", nil)
	for _, id := range []string{"snippet-curl-url", "snippet-cli-url"} {
		s := strings.ReplaceAll(textarea(t, p, id), "https://example.com/photo.png", img)
		if out := run(id, s); !strings.Contains(out, `"format"`) {
			t.Errorf("%s got:\n%s\n%s", id, out, s)
		}
	}
}

// try posts the try-it form of api with the parameters (by catalog name) and returns
// the page.
func (b *browser) try(csrf, api string, params url.Values) page {
	b.t.Helper()
	form := url.Values{"csrf_token": {csrf}}
	for k, vs := range params {
		form["p."+k] = vs
	}
	return b.do("POST", "/dashboard/api?id="+api, form)
}

// TestTryIt calls APIs through the try-it form and through REST with the same input,
// and checks that the form shows REST's answer: the envelope, the status, the credits
// the call cost, which the balance confirms, and the part of the balance that grants
// hold, which calls do not spend while the allowance lasts.
func TestTryIt(t *testing.T) {
	e := newEnv(t)
	const granted = 300
	if _, err := e.mgr.AdjustCredits(t.Context(), "acme", granted, "a grant for try-it to show", nil); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	csrf := b.signIn(e.key)
	tests := []struct {
		name, api, method string
		params            url.Values
		status            int
		charged           bool
		contains          string
	}{
		{"valid", "hash", "GET", url.Values{"text": {"hello"}, "algorithm": {"md5"}}, 200, true, `"hash":"5d41402abc4b2a76b9719d911017c592"`},
		{"defaults apply", "hash", "GET", url.Values{"text": {"hello"}}, 200, true, `"algorithm":"sha256"`},
		{"POST API", "hmac", "POST", url.Values{"message": {"m"}, "secret": {"s"}, "encoding": {"base64"}}, 200, true, `"encoding":"base64"`},
		{"missing parameter", "hash", "GET", url.Values{"algorithm": {"md5"}}, 400, false, `parameter \"text\": is required`},
		{"out of bounds", "uuid-generator", "GET", url.Values{"count": {"101"}}, 400, false, `parameter \"count\"`},
		{"not an integer", "echo", "POST", url.Values{"message": {"x"}, "delay_ms": {"1.5"}}, 400, false, `parameter \"delay_ms\": must be an integer`},
		{"not in the enum", "hash", "GET", url.Values{"text": {"x"}, "algorithm": {"crc"}}, 400, false, `parameter \"algorithm\"`},
		{"well-formed but wrong: charged", "date-info", "GET", url.Values{"date": {"2026-02-30"}}, 400, true, `"status":"error"`},
		{"failure on the service's side: refunded", "broken", "GET", url.Values{}, 500, false, `"status":"error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.balance(t)
			p := b.try(csrf, tt.api, tt.params)
			if p.status != http.StatusOK {
				t.Fatalf("try: %d\n%s", p.status, p.body)
			}
			api, _ := e.svc.Catalog().Lookup(tt.api)
			cost := int64(0)
			if tt.charged {
				cost = api.Cost
			}
			after := e.balance(t)
			if before-after != cost {
				t.Errorf("the try took %d credits, want %d", before-after, cost)
			}
			shown := shownEnvelope(t, p)
			if !strings.Contains(shown, tt.contains) {
				t.Errorf("the envelope %s lacks %s", shown, tt.contains)
			}
			if got := dataValue(t, p, "try-status"); got != strconvI(tt.status) {
				t.Errorf("status %s, want %d", got, tt.status)
			}
			if got := dataValue(t, p, "try-cost"); got != strconvI64(cost) {
				t.Errorf("the page says it cost %s, want %d", got, cost)
			}
			if got := dataValue(t, p, "try-remaining"); got != strconvI64(after) {
				t.Errorf("the page says %s remain, the account has %d", got, after)
			}
			if got := dataValue(t, p, "try-granted"); got != strconvI(granted) {
				t.Errorf("the page says %s of the balance is granted, want %d", got, granted)
			}
			// REST, with the same input, answers the same.
			r := e.restCall(t, e.key, tt.api, tt.method, tt.params)
			if tt.api == "broken" {
				r.body = strings.TrimSpace(r.body)
			}
			if r.status != tt.status || r.body != shown {
				t.Errorf("REST answered %d %s; the page showed %d %s", r.status, r.body, tt.status, shown)
			}
			if got := r.header.Get("X-Credits-Cost"); got != strconvI64(cost) {
				t.Errorf("REST's X-Credits-Cost %s, want %d", got, cost)
			}
			if want := r.header.Get("X-Error-Code"); want != "" && !strings.Contains(p.body, "<code>X-Error-Code: "+want+"</code>") {
				t.Errorf("the page does not show X-Error-Code %s", want)
			}
		})
	}
	if strings.Contains(e.logs.String(), e.key) {
		t.Error("a key value was logged")
	}
}

func strconvI(n int) string { return strconv.Itoa(n) }

func strconvI64(n int64) string { return strconv.FormatInt(n, 10) }

// imageServer serves a PNG image and returns its address.
func imageServer(t *testing.T) string {
	png := testserver.PNG(t, 7, 5)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/photo.png"
}

// TestTryItRefusals checks that the try-it form is refused as every dashboard form is
// (another origin, no CSRF token, no session) without calling anything, that its
// input is bounded, and that the key's restrictions and the plan's limits apply to it
// as to a REST call.
func TestTryItRefusals(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	before := e.balance(t)
	form := url.Values{"csrf_token": {csrf}, "p.text": {"x"}}
	if p := b.do("POST", "/dashboard/api?id=hash", form, "Sec-Fetch-Site", "cross-site"); p.status != http.StatusForbidden {
		t.Errorf("a cross-site try: %d, want 403", p.status)
	}
	if p := b.do("POST", "/dashboard/api?id=hash", url.Values{"p.text": {"x"}}); p.status != http.StatusForbidden {
		t.Errorf("a try without the CSRF token: %d, want 403", p.status)
	}
	if p := b.do("POST", "/dashboard/api?id=hash", url.Values{"csrf_token": {"forged"}, "p.text": {"x"}}); p.status != http.StatusForbidden {
		t.Errorf("a try with another CSRF token: %d, want 403", p.status)
	}
	if p := e.browser(t).do("POST", "/dashboard/api?id=hash", form); p.status != http.StatusForbidden {
		t.Errorf("a try without a session: %d, want 403", p.status)
	}
	big := url.Values{"csrf_token": {csrf}, "p.text": {strings.Repeat("x", 70<<10)}}
	if p := b.do("POST", "/dashboard/api?id=hash", big); p.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 70 KiB form: %d, want 413", p.status)
	}
	if p := b.try(csrf, "nope", url.Values{}); p.status != http.StatusNotFound {
		t.Errorf("a try of an unknown API: %d, want 404", p.status)
	}
	// A text at its API's bound passes; one past it is the API's 400, not charged.
	if p := b.try(csrf, "hash", url.Values{"text": {strings.Repeat("x", 10001)}}); !strings.Contains(shownEnvelope(t, p), `at most 10000 characters`) {
		t.Errorf("a text past the bound: %s", shownEnvelope(t, p))
	}
	if after := e.balance(t); after != before {
		t.Errorf("the refused tries took %d credits", before-after)
	}

	// A key limited to hash is refused echo with 403, as over REST.
	value, _ := b.createKey(csrf, url.Values{"name": {"hash only"}, "api": {"hash"}})
	sub := e.browser(t)
	subCSRF := sub.signIn(value)
	p := sub.try(subCSRF, "echo", url.Values{"message": {"x"}})
	r := e.restCall(t, value, "echo", "POST", url.Values{"message": {"x"}})
	if r.status != http.StatusForbidden || dataValue(t, p, "try-status") != "403" || shownEnvelope(t, p) != r.body {
		t.Errorf("the scoped key's try of echo: page %s %s, REST %d %s", dataValue(t, p, "try-status"), shownEnvelope(t, p), r.status, r.body)
	}
	// A key limited to MCP may not try anything: the try is a REST call.
	mcpOnly, _ := b.createKey(csrf, url.Values{"name": {"mcp only"}, "channel": {"mcp"}})
	m := e.browser(t)
	mCSRF := m.signIn(mcpOnly)
	if p := m.try(mCSRF, "hash", url.Values{"text": {"x"}}); dataValue(t, p, "try-status") != "403" ||
		!strings.Contains(shownEnvelope(t, p), "may not be used over rest") {
		t.Errorf("the MCP key's try: %s %s", dataValue(t, p, "try-status"), shownEnvelope(t, p))
	}

	// An account with one credit: the second call is refused for credits, with the
	// envelope and the headers REST gives.
	_, _, tinyKey, err := e.mgr.CreateAccount(t.Context(), accounts.Spec{ID: "tiny", Plan: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	tb := e.browser(t)
	tCSRF := tb.signIn(tinyKey)
	if p := tb.try(tCSRF, "hash", url.Values{"text": {"x"}}); dataValue(t, p, "try-status") != "200" || dataValue(t, p, "try-remaining") != "0" {
		t.Errorf("the tiny account's first try: %s, remaining %s", dataValue(t, p, "try-status"), dataValue(t, p, "try-remaining"))
	}
	p = tb.try(tCSRF, "hash", url.Values{"text": {"x"}})
	if dataValue(t, p, "try-status") != "429" || !strings.Contains(p.body, "<code>X-Error-Code: credits_exhausted</code>") || dataValue(t, p, "try-cost") != "0" {
		t.Errorf("the tiny account's second try: %s\n%s", dataValue(t, p, "try-status"), shownEnvelope(t, p))
	}
	// Its rate limit (2 a minute) is the same limiter as REST's: a REST call now is
	// the third of the minute, refused for the rate.
	if r := e.restCall(t, tinyKey, "hash", "GET", url.Values{"text": {"x"}}); r.status != http.StatusTooManyRequests || r.header.Get("X-Error-Code") != "rate_limited" {
		t.Errorf("a REST call after two tries: %d %s, want 429 rate_limited", r.status, r.header.Get("X-Error-Code"))
	}
	if p := tb.try(tCSRF, "hash", url.Values{"text": {"x"}}); !strings.Contains(p.body, "<code>X-Error-Code: rate_limited</code>") || !strings.Contains(p.body, "<code>Retry-After: ") {
		t.Errorf("a try past the rate limit: %s", shownEnvelope(t, p))
	}
}

// TestTryItFile uploads a file through the try-it form, and gives one by its address.
func TestTryItFile(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	upload := func(name string, data []byte, fields ...string) page {
		t.Helper()
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		if csrf != "" {
			mw.WriteField("csrf_token", csrf)
		}
		for i := 0; i+1 < len(fields); i += 2 {
			mw.WriteField(fields[i], fields[i+1])
		}
		if name != "" {
			fw, _ := mw.CreateFormFile("p.image", name)
			fw.Write(data)
		}
		mw.Close()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", e.srv.URL+"/dashboard/api?id=image-info", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		res, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return page{status: res.StatusCode, header: res.Header, body: string(out)}
	}
	before := e.balance(t)
	png := testserver.PNG(t, 7, 5)
	p := upload("photo.png", png)
	if dataValue(t, p, "try-status") != "200" || !strings.Contains(shownEnvelope(t, p), `"format":"png"`) || dataValue(t, p, "try-cost") != "2" {
		t.Fatalf("an upload: %s %s", dataValue(t, p, "try-status"), shownEnvelope(t, p))
	}
	if p := upload("notes.txt", []byte("not an image")); dataValue(t, p, "try-status") != "400" || dataValue(t, p, "try-cost") != "0" {
		t.Errorf("a text file: %s %s", dataValue(t, p, "try-status"), shownEnvelope(t, p))
	}
	if p := upload("", nil); !strings.Contains(shownEnvelope(t, p), "needs a file") {
		t.Errorf("no file: %s", shownEnvelope(t, p))
	}
	if p := upload("huge.png", bytes.Repeat([]byte{0}, 6<<20)); p.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 6 MiB upload: %d, want 413", p.status)
	}
	img := imageServer(t)
	if p := upload("", nil, "p.url", img); dataValue(t, p, "try-status") != "200" || !strings.Contains(shownEnvelope(t, p), `"format":"png"`) {
		t.Errorf("the URL form: %s %s", dataValue(t, p, "try-status"), shownEnvelope(t, p))
	}
	if after := e.balance(t); before-after != 4 {
		t.Errorf("two image calls took %d credits, want 4", before-after)
	}
	// Without the CSRF token, or with another, the multipart post is refused.
	for _, token := range []string{"", "forged"} {
		csrf = token
		if p := upload("photo.png", png); p.status != http.StatusForbidden {
			t.Errorf("a multipart try with the token %q: %d, want 403", token, p.status)
		}
	}
	if after := e.balance(t); before-after != 4 {
		t.Errorf("refused uploads were charged")
	}
}
