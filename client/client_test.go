package client_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// newClient returns a client of srv with the primary key, and opts (which may be nil)
// otherwise.
func newClient(t *testing.T, srv *testserver.Server, key string, opts *client.Options) *client.Client {
	t.Helper()
	o := client.Options{}
	if opts != nil {
		o = *opts
	}
	o.BaseURL = srv.URL
	c, err := client.New(key, &o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSampleCatalog calls every API of the sample catalog, in every form, through a
// live server, and checks the results and the credit headers.
func TestSampleCatalog(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv, testserver.PrimaryKey, nil)
	img := srv.ImageFile(t)
	sum := sha256.Sum256([]byte("hello"))
	tests := []struct {
		name string
		call func(ctx context.Context) (*client.Response, error)
		cost int64
		want map[string]any // fields of data to compare, by their JSON text
	}{
		{"hash", func(ctx context.Context) (*client.Response, error) {
			return c.Execute(ctx, "hash", map[string]any{"text": "hello"})
		}, 1, map[string]any{"algorithm": "sha256", "hash": hex.EncodeToString(sum[:])}},
		{"hash/md5", func(ctx context.Context) (*client.Response, error) {
			return c.Execute(ctx, "hash", map[string]any{"text": "hello", "algorithm": "md5"})
		}, 1, map[string]any{"algorithm": "md5", "hash": "5d41402abc4b2a76b9719d911017c592"}},
		{"hmac", func(ctx context.Context) (*client.Response, error) {
			return c.Execute(ctx, "hmac", map[string]any{"message": "hello", "secret": "key", "encoding": "base64"})
		}, 1, map[string]any{"algorithm": "sha256", "encoding": "base64", "hmac": hmacBase64("key", "hello")}},
		{"uuid-generator", func(ctx context.Context) (*client.Response, error) {
			return c.Execute(ctx, "uuid-generator", map[string]any{"count": 3})
		}, 1, map[string]any{"count": 3}},
		{"uuid-generator/uint8", func(ctx context.Context) (*client.Response, error) {
			return c.Execute(ctx, "uuid-generator", map[string]any{"count": uint8(2)})
		}, 1, map[string]any{"count": 2}},
		{"date-info", func(ctx context.Context) (*client.Response, error) {
			return c.Execute(ctx, "date-info", map[string]any{"date": "2024-02-29"})
		}, 1, map[string]any{"day-of-week": "Thursday", "iso:week": 9, "quarter/year": "Q1/2024", "1st-of-month": "2024-02-01", "is leap year": true}},
		{"echo", func(ctx context.Context) (*client.Response, error) {
			return c.Execute(ctx, "echo", map[string]any{"message": "hi", "delay_ms": 0})
		}, 1, map[string]any{"message": "hi", "delay_ms": 0}},
		{"image-info/file", func(ctx context.Context) (*client.Response, error) {
			return c.ExecuteWithFile(ctx, "image-info", img, nil)
		}, 2, map[string]any{"format": "png", "width": testserver.PNGWidth, "height": testserver.PNGHeight, "bytes": len(srv.PNG)}},
		{"image-info/url", func(ctx context.Context) (*client.Response, error) {
			return c.ExecuteWithURL(ctx, "image-info", srv.FileURL, nil)
		}, 2, map[string]any{"format": "png", "width": testserver.PNGWidth}},
		{"image-info/url param", func(ctx context.Context) (*client.Response, error) {
			return c.Execute(ctx, "image-info", map[string]any{"url": srv.FileURL})
		}, 2, map[string]any{"format": "png", "height": testserver.PNGHeight}},
	}
	remaining := srv.Balance(t, "acme")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := tt.call(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var data map[string]any
			if err := resp.Decode(&data); err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				if got, w := jsonText(t, data[k]), jsonText(t, want); got != w {
					t.Errorf("data[%q] = %s, want %s (data %s)", k, got, w, resp.Data)
				}
			}
			remaining -= tt.cost
			cr := resp.Credits
			if !cr.Reported || cr.Cost != tt.cost || cr.Remaining != remaining || cr.Plan != "pro" || cr.Limit != 100000 || cr.Renewal.IsZero() {
				t.Errorf("credits %+v, want cost %d remaining %d on plan pro", cr, tt.cost, remaining)
			}
			if resp.Rate.Limit != 600 || resp.Rate.Remaining <= 0 {
				t.Errorf("rate %+v, want limit 600", resp.Rate)
			}
			var env client.Envelope
			if err := json.Unmarshal(resp.Body, &env); err != nil || env.Status != "ok" || !bytes.Equal(env.Data, resp.Data) {
				t.Errorf("body %s is not the envelope of data %s (%v)", resp.Body, resp.Data, err)
			}
		})
	}
	if got := srv.Balance(t, "acme"); got != remaining {
		t.Errorf("balance %d, want %d", got, remaining)
	}
	for _, m := range srv.AuthModes() {
		if m != "go-package" {
			t.Fatalf("X-Auth-Mode %q, want go-package", m)
		}
	}
	if n := srv.CatalogFetches(); n != 1 {
		t.Errorf("the catalog was fetched %d times, want once", n)
	}
}

func hmacBase64(key, message string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(message))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestValidation proves that a call that breaks a rule is refused with an error naming
// the parameter and never reaches the network: the server counts no request at all
// when the catalog is given, and only the catalog fetch when it is not.
func TestValidation(t *testing.T) {
	dir := t.TempDir()
	writeFile := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := append(testserver.PNG(t, 2, 2), make([]byte, 5<<20)...)
	bigFile, textFile, emptyFile := writeFile("big.png", big), writeFile("notes.png", []byte("plain text")), writeFile("empty.png", nil)
	tests := []struct {
		name   string
		call   func(c *client.Client, ctx context.Context) error
		param  string
		reason string // a fragment of the reason
	}{
		{"required", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "hash", nil)
			return err
		}, "text", "is required"},
		{"required empty string", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "hmac", map[string]any{"message": "m", "secret": ""})
			return err
		}, "secret", "must not be empty"},
		{"type", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "uuid-generator", map[string]any{"count": "three"})
			return err
		}, "count", "must be an integer"},
		{"integer not whole", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "uuid-generator", map[string]any{"count": 1.5})
			return err
		}, "count", "must be an integer"},
		{"range high", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "uuid-generator", map[string]any{"count": 101})
			return err
		}, "count", "at most 100"},
		{"range low", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "echo", map[string]any{"message": "m", "delay_ms": -1})
			return err
		}, "delay_ms", "at least 0"},
		{"length", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "echo", map[string]any{"message": strings.Repeat("é", 1001)})
			return err
		}, "message", "at most 1000 characters"},
		{"enum", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "hash", map[string]any{"text": "t", "algorithm": "crc32"})
			return err
		}, "algorithm", "one of md5, sha1, sha256, sha512"},
		{"format", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "date-info", map[string]any{"date": "29/02/2024"})
			return err
		}, "date", "YYYY-MM-DD"},
		{"unknown", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "hash", map[string]any{"text": "t", "algo": "md5"})
			return err
		}, "algo", "unknown parameter; this API accepts text, algorithm"},
		{"not JSON", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "hash", map[string]any{"text": func() {}})
			return err
		}, "text", "cannot be encoded as JSON"},
		{"file API without a file", func(c *client.Client, ctx context.Context) error {
			_, err := c.Execute(ctx, "image-info", nil)
			return err
		}, "image", "ExecuteWithFile"},
		{"file too large", func(c *client.Client, ctx context.Context) error {
			_, err := c.ExecuteWithFile(ctx, "image-info", bigFile, nil)
			return err
		}, "image", "larger than the 5242880 bytes"},
		{"file of the wrong type", func(c *client.Client, ctx context.Context) error {
			_, err := c.ExecuteWithFile(ctx, "image-info", textFile, nil)
			return err
		}, "image", "is text/plain; charset=utf-8; the image-info API takes image/png, image/jpeg, image/gif"},
		{"empty file", func(c *client.Client, ctx context.Context) error {
			_, err := c.ExecuteWithFile(ctx, "image-info", emptyFile, nil)
			return err
		}, "image", "is empty"},
		{"missing file", func(c *client.Client, ctx context.Context) error {
			_, err := c.ExecuteWithFile(ctx, "image-info", filepath.Join(dir, "nope.png"), nil)
			return err
		}, "image", "cannot be read"},
		{"url not http", func(c *client.Client, ctx context.Context) error {
			_, err := c.ExecuteWithURL(ctx, "image-info", "ftp://example.com/a.png", nil)
			return err
		}, "url", "http or https URL"},
		{"url among the fields", func(c *client.Client, ctx context.Context) error {
			_, err := c.ExecuteWithFile(ctx, "image-info", bigFile, map[string]any{"url": "https://example.com/a.png"})
			return err
		}, "url", "must not be among the fields"},
		{"unknown field of a file call", func(c *client.Client, ctx context.Context) error {
			_, err := c.ExecuteWithURL(ctx, "image-info", "https://example.com/a.png", map[string]any{"size": 1})
			return err
		}, "size", "unknown parameter"},
		{"file to an API without files", func(c *client.Client, ctx context.Context) error {
			_, err := c.ExecuteWithFile(ctx, "hash", bigFile, nil)
			return err
		}, "", "takes no file"},
	}
	for _, given := range []bool{true, false} {
		t.Run(fmt.Sprintf("catalog given %v", given), func(t *testing.T) {
			srv := testserver.Start(t)
			var opts *client.Options
			if given {
				opts = &client.Options{Catalog: apis.All()}
			}
			c := newClient(t, srv, testserver.PrimaryKey, opts)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					err := tt.call(c, t.Context())
					var ve *client.ValidationError
					if !errors.As(err, &ve) {
						t.Fatalf("error %v, want a *ValidationError", err)
					}
					if ve.Param != tt.param || !strings.Contains(ve.Reason, tt.reason) || ve.APIID == "" {
						t.Errorf("error %+v, want parameter %q and a reason with %q", ve, tt.param, tt.reason)
					}
					if tt.param != "" && !strings.Contains(err.Error(), fmt.Sprintf("parameter %q", tt.param)) {
						t.Errorf("message %q does not name the parameter", err)
					}
				})
			}
			if n := srv.APICalls(); n != 0 {
				t.Errorf("%d requests reached the APIs, want none", n)
			}
			if n, want := srv.CatalogFetches(), map[bool]int{true: 0, false: 1}[given]; n != want {
				t.Errorf("%d catalog fetches, want %d", n, want)
			}
		})
	}
}

// TestErrors maps each refusal of the service to an *APIError with its status, code,
// message and envelope.
func TestErrors(t *testing.T) {
	srv := testserver.Start(t)
	// The rate-limited account spends its one call of the minute.
	if _, err := newClient(t, srv, testserver.RateLimitedKey, nil).Execute(t.Context(), "hash", map[string]any{"text": "a"}); err != nil {
		t.Fatal(err)
	}
	ghost := catalog.API{ID: "ghost", Method: http.MethodGet, Cost: 1}
	tests := []struct {
		name    string
		key     string
		api     string
		params  map[string]any
		status  int
		code    string
		message string // a fragment
		charged int64  // X-Credits-Cost, or -1 when the answer has no credit headers
	}{
		{"401 unknown key", testserver.UnknownKey, "hash", map[string]any{"text": "a"}, 401, "unauthorized", "", -1},
		{"403 restricted key", testserver.RestrictedKey, "hash", map[string]any{"text": "a"}, 403, "forbidden", "", -1},
		{"429 rate limited", testserver.RateLimitedKey, "hash", map[string]any{"text": "a"}, 429, "rate_limited", "", 0},
		{"429 no credits", testserver.NoCreditsKey, "hash", map[string]any{"text": "a"}, 429, "credits_exhausted", "", 0},
		{"400 rejected and charged", testserver.PrimaryKey, "date-info", map[string]any{"date": "2026-02-30"}, 400, "rejected", "does not exist", 1},
		{"404 unknown to the service", testserver.PrimaryKey, "ghost", nil, 404, "not_found", "ghost", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, srv, tt.key, &client.Options{Catalog: append(apis.All(), ghost)})
			_, err := c.Execute(t.Context(), tt.api, tt.params)
			var e *client.APIError
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want an *APIError", err)
			}
			if e.StatusCode != tt.status || e.Code != tt.code || e.APIID != tt.api {
				t.Errorf("status %d code %q api %q, want %d %q %q", e.StatusCode, e.Code, e.APIID, tt.status, tt.code, tt.api)
			}
			if e.Message == "" || !strings.Contains(e.Message, tt.message) || e.Envelope.Status != "error" || e.Envelope.Error != e.Message || string(e.Envelope.Data) != "null" {
				t.Errorf("message %q envelope %+v, want the envelope's message with %q", e.Message, e.Envelope, tt.message)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(tt.status)) || !strings.Contains(err.Error(), e.Message) {
				t.Errorf("Error() = %q, want the status and the message", err)
			}
			if tt.charged < 0 {
				if e.Credits.Reported {
					t.Errorf("credits %+v on an unauthenticated answer", e.Credits)
				}
			} else if !e.Credits.Reported || e.Credits.Cost != tt.charged {
				t.Errorf("credits %+v, want cost %d", e.Credits, tt.charged)
			}
			if tt.code == "rate_limited" && (e.Rate.RetryAfter <= 0 || e.Rate.Limit != 1) {
				t.Errorf("rate %+v, want limit 1 and a Retry-After", e.Rate)
			}
			if retry := client.IsRetryable(err); retry != (tt.code == "rate_limited") {
				t.Errorf("IsRetryable = %v", retry)
			}
		})
	}
	if got, want := tollgate.CodeCreditsExhausted.String(), "credits_exhausted"; got != want {
		t.Errorf("the service names exhausted credits %q; IsRetryable checks %q", got, want)
	}
}

// TestEdge403 maps the edge's bare HTML 403 to an *APIError with a message that says
// what happened.
func TestEdge403(t *testing.T) {
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("<html><body>403 Forbidden</body></html>"))
	}))
	t.Cleanup(edge.Close)
	c, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: edge.URL, Catalog: apis.All()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Execute(t.Context(), "hash", map[string]any{"text": "a"})
	var e *client.APIError
	if !errors.As(err, &e) || e.StatusCode != 403 || e.Envelope.Status != "" || !strings.Contains(e.Message, "key is missing or not UUID-shaped") {
		t.Fatalf("error %#v, want a 403 APIError about the edge", err)
	}
}

// TestNew checks the constructor's refusals, none of which shows the key.
func TestNew(t *testing.T) {
	bad := catalog.API{ID: "Bad ID", Method: http.MethodGet, Cost: 1}
	tests := []struct {
		name string
		key  string
		opts *client.Options
		want string
	}{
		{"no key", "", nil, "no API key"},
		{"blank key", "  \n", nil, "no API key"},
		{"truncated key", testserver.PrimaryKey[:30], nil, "not UUID-shaped"},
		{"placeholder", "undefined", nil, "not UUID-shaped"},
		{"base URL scheme", testserver.PrimaryKey, &client.Options{BaseURL: "localhost:8080"}, "http or https"},
		{"base URL with v1", testserver.PrimaryKey, &client.Options{BaseURL: "https://api.example.com/v1/"}, "without it"},
		{"base URL with query", testserver.PrimaryKey, &client.Options{BaseURL: "https://api.example.com/?x=1"}, "no query"},
		{"base URL with a password", testserver.PrimaryKey, &client.Options{BaseURL: "https://me:s3cret@api.example.com"}, "me:xxxxx@"},
		{"catalog", testserver.PrimaryKey, &client.Options{Catalog: []catalog.API{bad}}, "Options.Catalog"},
		{"catalog twice", testserver.PrimaryKey, &client.Options{Catalog: []catalog.API{apis.Hash(), apis.Hash()}}, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.New(tt.key, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error with %q", err, tt.want)
			}
			if k := strings.TrimSpace(tt.key); k != "" && strings.Contains(err.Error(), k) {
				t.Errorf("the error %q shows the key", err)
			}
		})
	}
	if _, err := client.New(" "+testserver.PrimaryKey+"\n", nil); err != nil {
		t.Errorf("a key with surrounding white space: %v", err)
	}
}

// TestKeyStaysSecret checks that the key is sent in x-api-key to API calls only: not
// to the catalog, not in URLs, not in errors, and not when a Client is printed.
func TestKeyStaysSecret(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // path -> x-api-key
	var urls []string
	srv := testserver.Start(t)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("X-Api-Key")
		urls = append(urls, r.URL.String())
		mu.Unlock()
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, srv.URL+r.URL.String(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		w.Write(b.Bytes())
	}))
	t.Cleanup(proxy.Close)
	c, err := client.New(testserver.UnknownKey, &client.Options{BaseURL: proxy.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Execute(t.Context(), "hash", map[string]any{"text": "a"})
	if err == nil {
		t.Fatal("a call with an unknown key succeeded")
	}
	if seen["/v1/catalog"] != "" || seen["/v1/hash"] != testserver.UnknownKey {
		t.Errorf("keys sent %v, want the key to /v1/hash only", seen)
	}
	for _, s := range append(urls, err.Error(), fmt.Sprintf("%v %+v %#v", c, c, c)) {
		if strings.Contains(s, testserver.UnknownKey) {
			t.Errorf("%q shows the key", s)
		}
	}
}

// TestRedirectNotFollowed checks that a redirect is returned as an error and the key
// never reaches the other host.
func TestRedirectNotFollowed(t *testing.T) {
	var reached bool
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	t.Cleanup(other.Close)
	redirector := httptest.NewServer(http.RedirectHandler(other.URL+"/v1/hash", http.StatusTemporaryRedirect))
	t.Cleanup(redirector.Close)
	c, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: redirector.URL, Catalog: apis.All(), HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Execute(t.Context(), "hash", map[string]any{"text": "a"})
	var e *client.APIError
	if !errors.As(err, &e) || e.StatusCode != http.StatusTemporaryRedirect || !strings.Contains(e.Message, "does not follow redirects") {
		t.Fatalf("error %v, want a 307 APIError", err)
	}
	if reached {
		t.Error("the redirect was followed")
	}
}

// TestBounds checks the limits on what the client reads and waits for.
func TestBounds(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/catalog":
			w.Write(bytes.Repeat([]byte(" "), 2048))
		case "/v1/hash":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"status":"ok","error":null,"data":{"hash":%q}}`, strings.Repeat("a", 4096))
		case "/v1/echo":
			select { // answer only when the client has given up
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	tests := []struct {
		name   string
		opts   client.Options
		api    string
		params map[string]any
		want   string
	}{
		{"answer", client.Options{Catalog: apis.All(), MaxResponseBytes: 1024}, "hash", map[string]any{"text": "a"}, "larger than the 1024 bytes"},
		{"catalog", client.Options{MaxResponseBytes: 1024}, "hash", map[string]any{"text": "a"}, "cannot read the catalog"},
		{"timeout", client.Options{Catalog: apis.All(), Timeout: 20 * time.Millisecond}, "echo", map[string]any{"message": "m"}, context.DeadlineExceeded.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.BaseURL = srv.URL
			c, err := client.New(testserver.PrimaryKey, &o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Execute(t.Context(), tt.api, tt.params)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}

// TestCatalogOnce checks that concurrent first calls fetch the catalog once, and that
// Catalog and API read it.
func TestCatalogOnce(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv, testserver.PrimaryKey, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.Execute(t.Context(), "uuid-generator", nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := srv.CatalogFetches(); n != 1 {
		t.Errorf("%d catalog fetches, want 1", n)
	}
	list, err := c.Catalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range list {
		ids = append(ids, a.ID)
	}
	if got := strings.Join(ids, " "); got != "date-info echo hash hmac image-info uuid-generator" {
		t.Errorf("catalog %s", got)
	}
	if _, err := c.API(t.Context(), "hsh"); !errors.Is(err, client.ErrUnknownAPI) || !strings.Contains(err.Error(), `"hsh"`) {
		t.Errorf("API(hsh): %v, want ErrUnknownAPI naming it", err)
	}
}
