//go:build unix

package tollgate_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// receive is the webhook receiver of README.md's Webhooks section and of
// docs/webhooks.md ("With the Go client"): TestREADMEWebhooks keeps their Go blocks
// equal to it, and calls it.
func receive(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	ev, err := client.VerifyWebhook(os.Getenv("WEBHOOK_SECRET"), r.Header, body, time.Now(), 0)
	if err != nil {
		http.Error(w, "not signed by the service", http.StatusUnauthorized)
		return
	}
	// Skip ev.ID if it was handled already; then act on ev.Type and ev.Decode(&data).
	log.Printf("webhook %s: %s", ev.ID, ev.Type)
	w.WriteHeader(http.StatusNoContent)
}

// TestREADMEWebhooks checks the snippets of README.md's Webhooks section: its curl
// block, run against the example server as the tour's Try it starts it, registers an
// endpoint and gets its secret; its Go block, and docs/webhooks.md's, are the function
// receive, which takes a delivery signed with the endpoint's secret and refuses one
// signed with another.
func TestREADMEWebhooks(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	fn, err := funcSource("readme_webhooks_test.go", "receive")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []struct{ name, text, heading string }{
		{"README.md", string(readme), "## Webhooks"},
		{"docs/webhooks.md", string(page), "### With the Go client"},
	} {
		block, err := sectionBlock(doc.text, doc.heading, "go")
		if err != nil {
			t.Fatalf("%s: %v", doc.name, err)
		}
		if d := diffLines(doc.name, block, "receive", fn); d != "" {
			t.Errorf("the Go block of %s's section %q differs from the function receive of readme_webhooks_test.go; make them equal again:\n%s", doc.name, doc.heading, d)
		}
	}

	// The curl block registers an endpoint and answers its secret.
	block := shellBlock(t, "README.md", string(readme), "/v1/account/webhooks")
	script, _ := tryIt(t, block)
	output := runScript(t, script)
	okAnswers(t, script, output)
	var created struct {
		Data struct {
			ID, URL, Secret string
			Events          []string
		}
	}
	for line := range strings.Lines(output) {
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &created); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := created.Data
	if !strings.HasPrefix(d.ID, "ep_") || !strings.HasPrefix(d.Secret, "whsec_") || d.URL != "https://hooks.example.com/tollgate" ||
		strings.Join(d.Events, " ") != "credits.low key.rotated" {
		t.Fatalf("the endpoint the README's curl made: %+v\n%s", d, output)
	}

	// receive, with the endpoint's secret.
	t.Setenv("WEBHOOK_SECRET", d.Secret)
	const id = "msg_2c4h2h6rboqzu7ft3vxtqakr4e"
	body := `{"type":"key.rotated","timestamp":"2026-03-01T12:00:00Z","data":{"id":"` + id + `","account":"acme","key":"key_1"}}`
	other, err := signature.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, secret string
		status       int
	}{
		{"signed with the endpoint's secret", d.Secret, http.StatusNoContent},
		{"signed with another secret", other, http.StatusUnauthorized},
	} {
		now := time.Now()
		sig, err := signature.Sign(id, now, []byte(body), tt.secret)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		rec := httptest.NewRecorder()
		receive(rec, req)
		if rec.Code != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, rec.Code, rec.Body, tt.status)
		}
	}
}

// sectionBlock returns the lines of the first ```lang block of the Markdown section
// that starts with the line heading, before the next heading.
func sectionBlock(text, heading, lang string) ([]string, error) {
	var block []string
	in, open, other := false, false, false // other: in a block of another language
	for l := range strings.Lines(text) {
		l = strings.TrimSuffix(l, "\n")
		switch {
		case !in:
			in = strings.TrimSpace(l) == heading
		case open && strings.TrimSpace(l) == "```":
			return block, nil
		case open:
			block = append(block, l)
		case l == "```"+lang && !other:
			open, block = true, []string{}
		case strings.HasPrefix(l, "```"):
			other = !other
		case strings.HasPrefix(l, "#") && !other:
			return nil, fmt.Errorf("the section %q has no ```%s block", heading, lang)
		}
	}
	if !in {
		return nil, fmt.Errorf("no section %q", heading)
	}
	return nil, fmt.Errorf("the section %q has no closed ```%s block", heading, lang)
}

// funcSource returns the lines of the declaration of the function name in the Go file
// path, without its doc comment.
func funcSource(path, name string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return nil, err
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == name && fn.Recv == nil {
			return strings.Split(string(src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset]), "\n"), nil
		}
	}
	return nil, fmt.Errorf("no func %s", name)
}
