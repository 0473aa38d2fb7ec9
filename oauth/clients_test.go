package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/oauth"
)

func TestRegister(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		code        string // the error; "" for success
	}{
		{"loopback", "application/json", `{"redirect_uris":["http://127.0.0.1:3000/cb"]}`, 201, ""},
		{"localhost and https", "application/json", `{"redirect_uris":["http://localhost/cb","https://app.example/cb"],"client_name":"App"}`, 201, ""},
		{"ipv6 loopback", "application/json", `{"redirect_uris":["http://[::1]:8080/cb"]}`, 201, ""},
		{"secret asked for", "application/json", `{"redirect_uris":["https://app.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, 201, ""},
		{"unknown fields ignored", "application/json", `{"redirect_uris":["https://app.example/cb"],"software_id":"x","logo_uri":"https://app.example/l.png"}`, 201, ""},
		{"no redirect URIs", "application/json", `{"client_name":"App"}`, 400, "invalid_redirect_uri"},
		{"http on a public host", "application/json", `{"redirect_uris":["http://app.example/cb"]}`, 400, "invalid_redirect_uri"},
		{"custom scheme", "application/json", `{"redirect_uris":["com.example.app:/cb"]}`, 400, "invalid_redirect_uri"},
		{"javascript", "application/json", `{"redirect_uris":["javascript:alert(1)"]}`, 400, "invalid_redirect_uri"},
		{"relative", "application/json", `{"redirect_uris":["/cb"]}`, 400, "invalid_redirect_uri"},
		{"fragment", "application/json", `{"redirect_uris":["https://app.example/cb#x"]}`, 400, "invalid_redirect_uri"},
		{"credentials", "application/json", `{"redirect_uris":["https://user:pw@app.example/cb"]}`, 400, "invalid_redirect_uri"},
		{"userinfo on loopback", "application/json", `{"redirect_uris":["http://evil.example@127.0.0.1:9999/cb"]}`, 400, "invalid_redirect_uri"},
		{"empty fragment", "application/json", `{"redirect_uris":["http://127.0.0.1:9999/cb#"]}`, 400, "invalid_redirect_uri"},
		{"other loopback address", "application/json", `{"redirect_uris":["http://127.0.0.2/cb"]}`, 400, "invalid_redirect_uri"},
		{"uppercase scheme", "application/json", `{"redirect_uris":["HTTPS://app.example/cb"]}`, 400, "invalid_redirect_uri"},
		{"uppercase localhost", "application/json", `{"redirect_uris":["http://LOCALHOST/cb"]}`, 400, "invalid_redirect_uri"},
		{"port zero", "application/json", `{"redirect_uris":["https://app.example:0/cb"]}`, 400, "invalid_redirect_uri"},
		{"percent-encoded host", "application/json", `{"redirect_uris":["https://ex%61mple.com/cb"]}`, 400, "invalid_redirect_uri"},
		{"non-ASCII host", "application/json", `{"redirect_uris":["https://ex\u0430mple.com/cb"]}`, 400, "invalid_redirect_uri"},
		{"too long", "application/json", `{"redirect_uris":["https://app.example/` + strings.Repeat("a", 2100) + `"]}`, 400, "invalid_redirect_uri"},
		{"too many", "application/json", `{"redirect_uris":[` + strings.TrimSuffix(strings.Repeat(`"https://app.example/cb",`, 11), ",") + `]}`, 400, "invalid_redirect_uri"},
		{"long name", "application/json", `{"redirect_uris":["https://app.example/cb"],"client_name":"` + strings.Repeat("n", 201) + `"}`, 400, "invalid_client_metadata"},
		{"control character in name", "application/json", `{"redirect_uris":["https://app.example/cb"],"client_name":"a\u0007b"}`, 400, "invalid_client_metadata"},
		{"bidi override in name", "application/json", `{"redirect_uris":["https://app.example/cb"],"client_name":"Good \u202eppA"}`, 400, "invalid_client_metadata"},
		{"bidi isolate in name", "application/json", `{"redirect_uris":["https://app.example/cb"],"client_name":"\u2067App"}`, 400, "invalid_client_metadata"},
		{"zero-width space in name", "application/json", `{"redirect_uris":["https://app.example/cb"],"client_name":"Ap\u200bp"}`, 400, "invalid_client_metadata"},
		{"combining marks stacked in name", "application/json", `{"redirect_uris":["https://app.example/cb"],"client_name":"App` + strings.Repeat("\u0336\u0489", 40) + `"}`, 400, "invalid_client_metadata"},
		{"combining marks of a language in name", "application/json", `{"redirect_uris":["https://app.example/cb"],"client_name":"Vie\u0323\u0302t Nam \u0915\u094d\u0937"}`, 201, ""},
		{"implicit grant", "application/json", `{"redirect_uris":["https://app.example/cb"],"grant_types":["implicit"]}`, 400, "invalid_client_metadata"},
		{"token response type", "application/json", `{"redirect_uris":["https://app.example/cb"],"response_types":["token"]}`, 400, "invalid_client_metadata"},
		{"redirect URIs not a list", "application/json", `{"redirect_uris":"https://app.example/cb"}`, 400, "invalid_client_metadata"},
		{"not JSON", "application/json", `redirect_uris=x`, 400, "invalid_client_metadata"},
		{"data after the JSON", "application/json", `{"redirect_uris":["https://app.example/cb"]} {"redirect_uris":["https://evil.example/cb"]}`, 400, "invalid_client_metadata"},
		{"white space after the JSON", "application/json", "{\"redirect_uris\":[\"https://app.example/cb\"]}\r\n", 201, ""},
		{"form", "application/x-www-form-urlencoded", `redirect_uris=https://app.example/cb`, 400, "invalid_client_metadata"},
		{"huge", "application/json", `{"redirect_uris":["https://app.example/cb"],"pad":"` + strings.Repeat("p", 20<<10) + `"}`, 413, "invalid_client_metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := h.post(t, "/oauth/register", tt.contentType, tt.body)
			if tt.code != "" {
				wantOAuthError(t, a, tt.status, tt.code)
				return
			}
			if a.status != tt.status || a.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("got %d %s", a.status, a.body)
			}
			var sent map[string]any
			must(t, json.Unmarshal([]byte(tt.body), &sent))
			if id, _ := a.json["client_id"].(string); !strings.HasPrefix(id, "tgcl_") || a.json["token_endpoint_auth_method"] != "none" ||
				!equalJSON(a.json["redirect_uris"], sent["redirect_uris"]) || a.json["client_id_issued_at"] != float64(t0.Unix()) {
				t.Errorf("registration response = %s", a.body)
			}
		})
	}
}

func TestRegisterRateLimit(t *testing.T) {
	h := newHarness(t, func(o *oauth.Options) { o.RegistrationsPerMinute = 2 })
	body := `{"redirect_uris":["https://app.example/cb"]}`
	for i := range 2 {
		if a := h.post(t, "/oauth/register", "application/json", body); a.status != http.StatusCreated {
			t.Fatalf("registration %d: %d", i, a.status)
		}
	}
	a := h.post(t, "/oauth/register", "application/json", body)
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
		t.Errorf("third registration in a minute: %d, want 429 with Retry-After", a.status)
	}
	h.clock.Advance(30 * time.Second)
	if a := h.post(t, "/oauth/register", "application/json", body); a.status != http.StatusCreated {
		t.Errorf("registration after half a minute: %d, want 201", a.status)
	}
}

// TestUnusedClientsExpire checks that a client nobody approved is deleted after
// UnusedClientTTL, and that one with a live connection is kept.
func TestUnusedClientsExpire(t *testing.T) {
	h := newHarness(t)
	unused := h.register(t, callback)
	used := h.register(t, callback)
	h.tokens(t, h.newRequest(used, callback))
	h.clock.Advance(oauth.UnusedClientTTL + time.Hour)
	h.register(t, callback) // registrations purge expired records as they go

	if a := h.browser(t).open(t, h.newRequest(unused, callback).query()); a.status != http.StatusBadRequest {
		t.Errorf("authorizing an expired client: %d, want 400", a.status)
	}
	h.tokens(t, h.newRequest(used, callback))
}

// documentServer serves client metadata documents over TLS; TestMain makes its
// certificate trusted.
type documentServer struct {
	*httptest.Server
	fetches atomic.Int32
	docs    map[string]string // path -> body; "{url}" is replaced by the document's URL
}

func newDocumentServer(t *testing.T, docs map[string]string) *documentServer {
	d := &documentServer{docs: docs}
	d.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.fetches.Add(1)
		body, ok := d.docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(strings.ReplaceAll(body, "{url}", d.URL+r.URL.Path)))
	}))
	t.Cleanup(d.Close)
	return d
}

// TestClientMetadataDocument checks clients identified by the https URL of their
// metadata document.
func TestClientMetadataDocument(t *testing.T) {
	docs := newDocumentServer(t, map[string]string{
		"/client.json":       `{"client_id":"{url}","client_name":"Doc Client","redirect_uris":["` + callback + `"]}`,
		"/other-id.json":     `{"client_id":"https://elsewhere.example/client.json","redirect_uris":["` + callback + `"]}`,
		"/no-redirects.json": `{"client_id":"{url}"}`,
		"/bad-redirect.json": `{"client_id":"{url}","redirect_uris":["http://app.example/cb"]}`,
		"/fragment.json":     `{"client_id":"{url}","redirect_uris":["` + callback + `#x"]}`,
		"/userinfo.json":     `{"client_id":"{url}","redirect_uris":["http://evil.example@127.0.0.1:9000/callback"]}`,
		"/secret.json":       `{"client_id":"{url}","redirect_uris":["` + callback + `"],"token_endpoint_auth_method":"client_secret_post"}`,
		"/not-json.json":     `<html>`,
		"/trailing.json":     `{"client_id":"{url}","redirect_uris":["` + callback + `"]}<html>`,
		"/large.json":        `{"client_id":"{url}","redirect_uris":["` + callback + `"],"pad":"` + strings.Repeat("p", 6<<10) + `"}`,
	})
	h := newHarness(t, func(o *oauth.Options) { o.Fetch.AllowPrivate = true })
	id := docs.URL + "/client.json"

	q := h.newRequest(id, callback)
	b := h.browser(t)
	page := b.open(t, q.query())
	if !strings.Contains(page.body, "Doc Client") || !strings.Contains(page.body, "document published at "+strings.TrimPrefix(docs.URL, "https://")) {
		t.Errorf("the consent page of a document client does not name it and its document's host:\n%s", page.body)
	}
	v := redirected(t, b.submit(t, approved(formOf(t, page), h.acct.Key)), q)
	if a := h.exchange(t, q, v.Get("code")); a.status != http.StatusOK {
		t.Fatalf("exchange: %d %s", a.status, a.body)
	}
	fetched := docs.fetches.Load()
	h.browser(t).open(t, q.query())
	if docs.fetches.Load() != fetched {
		t.Error("the document was fetched again within its cache time")
	}
	h.clock.Advance(6 * time.Minute)
	formOf(t, h.browser(t).open(t, q.query()))
	if docs.fetches.Load() != fetched+1 {
		t.Error("the document was not fetched again after its cache time")
	}

	for _, path := range []string{"/other-id.json", "/no-redirects.json", "/bad-redirect.json", "/fragment.json", "/userinfo.json", "/secret.json", "/not-json.json", "/trailing.json", "/large.json", "/missing.json"} {
		a := h.browser(t).open(t, h.newRequest(docs.URL+path, callback).query())
		if a.status != http.StatusBadRequest || a.header.Get("Location") != "" || strings.Contains(a.body, `name="consent"`) {
			t.Errorf("%s: got %d, want an error page", path, a.status)
		}
	}
	for _, bad := range []string{docs.URL, docs.URL + "/", docs.URL + "/a/../client.json", "https://user@" + strings.TrimPrefix(docs.URL, "https://") + "/client.json"} {
		if a := h.browser(t).open(t, h.newRequest(bad, callback).query()); a.status != http.StatusBadRequest {
			t.Errorf("client_id %q: got %d, want 400", bad, a.status)
		}
	}
}

// TestClientMetadataDocumentOwnOrigin checks that a client_id URL on the server's own
// origin is refused: the consent page names the host a document is published at, and
// the server's own would read as the service vouching for the client, while any route
// of the host that answers JSON it does not control could serve the document.
func TestClientMetadataDocumentOwnOrigin(t *testing.T) {
	docs := newDocumentServer(t, map[string]string{
		"/client.json": `{"client_id":"{url}","client_name":"Tollgate Official","redirect_uris":["` + callback + `"]}`,
	})
	h := newHarness(t, func(o *oauth.Options) {
		o.Issuer = docs.URL
		o.Fetch.AllowPrivate = true
	})
	q := h.newRequest(docs.URL+"/client.json", callback)
	q.resource = docs.URL + "/v1/mcp"
	if a := h.browser(t).open(t, q.query()); a.status != http.StatusBadRequest || strings.Contains(a.body, `name="consent"`) {
		t.Errorf("a client_id on the issuer's origin: got %d, want an error page:\n%s", a.status, a.body)
	}
	if n := docs.fetches.Load(); n != 0 {
		t.Errorf("the issuer's origin was fetched %d times", n)
	}
}

// TestClientMetadataDocumentPrivate checks that by default a metadata document on a
// private address (here loopback) is not fetched.
func TestClientMetadataDocumentPrivate(t *testing.T) {
	docs := newDocumentServer(t, map[string]string{
		"/client.json": `{"client_id":"{url}","redirect_uris":["` + callback + `"]}`,
	})
	h := newHarness(t)
	a := h.browser(t).open(t, h.newRequest(docs.URL+"/client.json", callback).query())
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "loopback") {
		t.Errorf("got %d, want an error page saying the address is loopback:\n%s", a.status, a.body)
	}
	if n := docs.fetches.Load(); n != 0 {
		t.Errorf("the document server was reached %d times", n)
	}
}
