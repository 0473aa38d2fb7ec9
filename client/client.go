package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/wire"
)

// Defaults of [Options].
const (
	// DefaultBaseURL is the service a Client calls when Options.BaseURL is empty: a
	// local development server (go run ./examples/server).
	DefaultBaseURL = "http://localhost:8080"
	// DefaultTimeout bounds one attempt of a call, reading the answer included.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxResponseBytes caps the body of an answer, and of the catalog.
	DefaultMaxResponseBytes = 32 << 20
	// DefaultAuthMode is the X-Auth-Mode header a Client sends.
	DefaultAuthMode = "go-package"
)

// HeaderAuthMode names the client's ecosystem in every request ("go-package" for this
// one), so that the service can tell how its callers reach it.
const HeaderAuthMode = wire.HeaderAuthMode

// Options configures a [Client]. The zero value is the default; every field is
// optional.
type Options struct {
	// BaseURL is the address of the service: scheme, host, port and an optional path
	// prefix, without /v1/. APIs are called at BaseURL/v1/<api_id>. The default is
	// [DefaultBaseURL].
	BaseURL string
	// HTTPClient sends the requests. The default is a new http.Client with the default
	// transport. Its redirect policy is replaced: the client never follows redirects,
	// so that the key is never sent to another host.
	HTTPClient *http.Client
	// Timeout bounds each attempt of a call, and the catalog fetch, answer included.
	// The default is [DefaultTimeout]; a negative value means no timeout (the context
	// still applies).
	Timeout time.Duration
	// Catalog, if set, holds the definitions of the APIs the client may call, and the
	// client never fetches GET /v1/catalog. The definitions need no handlers. By
	// default the catalog is fetched on the first call and kept.
	Catalog []catalog.API
	// Retry, if set, retries 429 and 5xx answers (see [RetryPolicy]). By default
	// nothing is retried.
	Retry *RetryPolicy
	// AuthMode is the value of the X-Auth-Mode header. The default is
	// [DefaultAuthMode]; the command-line client sends "cli".
	AuthMode string
	// MaxResponseBytes caps the body of an answer and of the catalog; a longer one is
	// an error. The default is [DefaultMaxResponseBytes].
	MaxResponseBytes int64
}

// A Client calls the APIs of one Tollgate service with one key. It is safe for
// concurrent use; create one and reuse it.
type Client struct {
	key      *credential // a pointer, so that printing a Client shows an address, not the key
	base     string      // BaseURL without a trailing slash
	hc       *http.Client
	timeout  time.Duration
	retry    *RetryPolicy
	authMode string
	maxBody  int64
	cat      *apiSet
}

// credential holds the key.
type credential struct{ value string }

// ErrNoKey is returned by [New] when the key is empty.
var ErrNoKey = errors.New("client: no API key: pass the key of your account (a UUID) to New; read it from an environment variable rather than writing it in code")

// keyPattern is the shape of an API key: a UUID, 8-4-4-4-12 hexadecimal digits. The
// service refuses a value of any other shape before any lookup.
var keyPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ErrMalformedKey is returned by [New] when the key is not UUID-shaped: the service
// refuses such keys before they reach an API.
var ErrMalformedKey = errors.New("client: the API key is not UUID-shaped (8-4-4-4-12 hexadecimal digits); check that the whole key was copied, with nothing around it")

// New returns a client that authenticates with key. It checks the options and the
// key's shape, and reports [ErrNoKey] or [ErrMalformedKey] rather than sending a key
// that the service would refuse; surrounding white space is ignored. opts may be nil.
// New makes no request.
func New(key string, opts *Options) (*Client, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return nil, ErrNoKey
	}
	if !keyPattern.MatchString(key) {
		return nil, ErrMalformedKey
	}
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	c.key = &credential{key}
	return c, nil
}

// ReadCatalog fetches the catalog of the service at opts.BaseURL (GET /v1/catalog,
// which needs no key) and returns every API's definition, compiled and sorted by id.
// Only the options about reaching the service apply. opts may be nil.
func ReadCatalog(ctx context.Context, opts *Options) ([]*catalog.API, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Catalog = nil
	c, err := newClient(&o)
	if err != nil {
		return nil, err
	}
	return c.Catalog(ctx)
}

// newClient returns a client without a key, with the options checked.
func newClient(opts *Options) (*Client, error) {
	if opts == nil {
		opts = &Options{}
	}
	base, err := parseBaseURL(opts.BaseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{
		base:     base,
		timeout:  opts.Timeout,
		authMode: opts.AuthMode,
		maxBody:  opts.MaxResponseBytes,
		cat:      newAPISet(),
	}
	hc := http.Client{}
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.hc = &hc
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.authMode == "" {
		c.authMode = DefaultAuthMode
	}
	if c.maxBody <= 0 {
		c.maxBody = DefaultMaxResponseBytes
	}
	if opts.Retry != nil {
		c.retry = opts.Retry.withDefaults()
	}
	if opts.Catalog != nil {
		if err := c.cat.compile(opts.Catalog); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Ptr returns a pointer to v. The generated packages take optional parameters as
// pointers, nil meaning absent: hash.Params{Text: "hello", Algorithm: client.Ptr("md5")}.
func Ptr[T any](v T) *T { return &v }

// parseBaseURL checks a base URL and returns it without a trailing slash.
func parseBaseURL(s string) (string, error) {
	if s == "" {
		return DefaultBaseURL, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		if err == nil {
			s = u.Redacted() // a password in the URL stays out of the message
		}
		return "", fmt.Errorf("client: BaseURL %q must be an http or https address such as https://api.example.com, with no query, fragment or user name", s)
	}
	if strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/v1") {
		return "", fmt.Errorf("client: BaseURL %q ends in /v1; give the address without it, the client adds /v1/<api_id>", s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// Execute calls the API apiID with params, after validating them against the API's
// definition. Values are Go values of the parameters' JSON types: string, bool, any
// integer or float type, json.Number, slices and maps (or anything that encodes to
// JSON as the parameter's type). A nil value counts as absent. Defaults are not sent;
// the service applies them.
//
// A file API takes its file in [Client.ExecuteWithFile] or [Client.ExecuteWithURL];
// Execute calls it only when params holds its "url" parameter.
//
// It returns a [*ValidationError] when params break a rule (nothing is sent), an
// [*APIError] when the service refused the call, and the transport's error, wrapped,
// when there was no answer.
func (c *Client) Execute(ctx context.Context, apiID string, params map[string]any) (*Response, error) {
	api, err := c.API(ctx, apiID)
	if err != nil {
		return nil, err
	}
	sent, err := validate(api, params)
	if err != nil {
		return nil, err
	}
	if api.File != nil && sent[catalog.URLParam] == nil {
		return nil, &ValidationError{APIID: api.ID, Param: api.File.Name,
			Reason: "is required: the " + api.ID + " API needs a file; call ExecuteWithFile with its path, or ExecuteWithURL with its address"}
	}
	u := c.base + "/v1/" + api.ID
	if api.Method == http.MethodGet {
		q := url.Values{}
		for name, v := range sent {
			q.Set(name, textValue(v))
		}
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		return c.send(ctx, request{apiID: api.ID, method: http.MethodGet, url: u})
	}
	body, err := json.Marshal(sent)
	if err != nil {
		return nil, fmt.Errorf("client: encoding the parameters of %s: %w", api.ID, err)
	}
	return c.send(ctx, request{apiID: api.ID, method: http.MethodPost, url: u, body: body, contentType: "application/json"})
}

// ExecuteWithFile calls the file API apiID with the file at path, uploaded as
// multipart/form-data, and the other parameters in fields (as for [Client.Execute]).
// Before sending it checks the fields, and that the file is not empty, not larger
// than the API takes and of a media type it takes, judged from its content as the
// service judges it.
func (c *Client) ExecuteWithFile(ctx context.Context, apiID, path string, fields map[string]any) (*Response, error) {
	api, err := c.fileAPI(ctx, apiID, fields, "ExecuteWithFile")
	if err != nil {
		return nil, err
	}
	sent, err := validate(api, fields)
	if err != nil {
		return nil, err
	}
	data, err := readFile(api, path)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, name := range slices.Sorted(maps.Keys(sent)) {
		if err := mw.WriteField(name, textValue(sent[name])); err != nil {
			return nil, err
		}
	}
	hdr := textproto.MIMEHeader{}
	hdr.Set("Content-Disposition", multipart.FileContentDisposition(api.File.Name, filepath.Base(path)))
	hdr.Set("Content-Type", http.DetectContentType(data))
	part, err := mw.CreatePart(hdr)
	if err != nil {
		return nil, err
	}
	part.Write(data) // a bytes.Buffer does not fail
	if err := mw.Close(); err != nil {
		return nil, err
	}
	return c.send(ctx, request{apiID: api.ID, method: http.MethodPost, url: c.base + "/v1/" + api.ID, body: b.Bytes(), contentType: mw.FormDataContentType()})
}

// ExecuteWithURL calls the file API apiID with the address of the file, which the
// service fetches, and the other parameters in fields (as for [Client.Execute]). The
// address must be an http or https URL the service can reach.
func (c *Client) ExecuteWithURL(ctx context.Context, apiID, fileURL string, fields map[string]any) (*Response, error) {
	api, err := c.fileAPI(ctx, apiID, fields, "ExecuteWithURL")
	if err != nil {
		return nil, err
	}
	params := make(map[string]any, len(fields)+1)
	maps.Copy(params, fields)
	params[catalog.URLParam] = fileURL
	return c.Execute(ctx, api.ID, params)
}

// fileAPI looks up the API of a file call and checks that it takes a file and that
// the fields do not pass one.
func (c *Client) fileAPI(ctx context.Context, apiID string, fields map[string]any, method string) (*catalog.API, error) {
	api, err := c.API(ctx, apiID)
	if err != nil {
		return nil, err
	}
	if api.File == nil {
		return nil, &ValidationError{APIID: api.ID, Reason: "the " + api.ID + " API takes no file; call Execute instead of " + method}
	}
	for _, name := range []string{catalog.URLParam, api.File.Name} {
		if _, ok := fields[name]; ok {
			return nil, &ValidationError{APIID: api.ID, Param: name,
				Reason: "must not be among the fields of " + method + ", which passes the file itself"}
		}
	}
	return api, nil
}

// readFile reads the file of a file call, checking what the service would check.
func readFile(api *catalog.API, path string) ([]byte, error) {
	ff := api.File
	invalid := func(format string, args ...any) error {
		return &ValidationError{APIID: api.ID, Param: ff.Name, Reason: fmt.Sprintf(format, args...)}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, invalid("cannot be read: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, ff.MaxBytes+1))
	switch {
	case err != nil:
		return nil, invalid("cannot be read: %v", err)
	case int64(len(data)) > ff.MaxBytes:
		return nil, invalid("the file %s is larger than the %d bytes the %s API takes", filepath.Base(path), ff.MaxBytes, api.ID)
	case len(data) == 0:
		return nil, invalid("the file %s is empty", filepath.Base(path))
	}
	if ct := http.DetectContentType(data); !slices.Contains(ff.Types, ct) {
		return nil, invalid("the file %s is %s; the %s API takes %s", filepath.Base(path), ct, api.ID, strings.Join(ff.Types, ", "))
	}
	return data, nil
}

// validate checks params against the API's rules and returns the parameters to send:
// the given ones, converted to their declared types, without the defaults.
func validate(api *catalog.API, params map[string]any) (map[string]any, error) {
	in := make(map[string]any, len(params))
	for name, v := range params {
		jv, err := jsonValue(v)
		if err != nil {
			return nil, &ValidationError{APIID: api.ID, Param: name, Reason: "cannot be encoded as JSON: " + err.Error()}
		}
		if jv != nil {
			in[name] = jv
		}
	}
	typed, err := api.ValidateJSON(in)
	if err != nil {
		var pe *catalog.ParamError
		if errors.As(err, &pe) {
			return nil, &ValidationError{APIID: api.ID, Param: pe.Param, Reason: pe.Reason}
		}
		return nil, &ValidationError{APIID: api.ID, Reason: err.Error()}
	}
	for name := range in {
		in[name] = typed[name]
	}
	return in, nil
}

// jsonValue returns v in the form catalog validation reads: plain values as they are,
// anything else (slices, maps, structs, other number types) through a JSON round trip
// that keeps numbers exact.
func jsonValue(v any) (any, error) {
	switch v.(type) {
	case nil, string, bool, int, int32, int64, float64, json.Number:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	err = d.Decode(&out)
	return out, err
}

// textValue formats a validated value for a query string or a form field, as the
// service's text validation reads it: arrays and objects as JSON text.
func textValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	b, _ := json.Marshal(v) // validated values always encode
	return string(b)
}

// Validate checks params as [Client.Execute] would, without calling the API: it
// returns nil, a [*ValidationError], or the error of reading the catalog.
func (c *Client) Validate(ctx context.Context, apiID string, params map[string]any) error {
	api, err := c.API(ctx, apiID)
	if err != nil {
		return err
	}
	_, err = validate(api, params)
	return err
}

// request is one request to the service.
type request struct {
	apiID       string // the API it calls, for messages
	method, url string
	body        []byte
	contentType string
	// idempotencyKey, when set, is sent in the Idempotency-Key header. The service
	// runs a request with a key at most once, so such a request is also retried after a
	// transport failure and while the first attempt still runs (409).
	idempotencyKey string
}

// send makes the request, with the retries of the policy.
func (c *Client) send(ctx context.Context, r request) (*Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, r)
		if err == nil || c.retry == nil {
			return resp, err
		}
		wait, ok := c.retry.delay(attempt, err, r.retryable(ctx, err))
		if !ok {
			return nil, err
		}
		if serr := c.retry.Sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("client: stopped retrying the %s API: %w (last answer: %w)", r.apiID, serr, err)
		}
	}
}

// retryable reports whether the failed request may be sent again: an answer that
// waiting may fix ([IsRetryable]), and for a request with an idempotency key, also a
// transport failure and a 409 (the first attempt still running), as the service runs it
// at most once. A failure because ctx ended is not retried.
func (r request) retryable(ctx context.Context, err error) bool {
	if IsRetryable(err) {
		return true
	}
	if r.idempotencyKey == "" || ctx.Err() != nil {
		return false
	}
	var e *APIError
	if errors.As(err, &e) {
		return e.StatusCode == http.StatusConflict
	}
	return true
}

// attempt makes one request and reads its answer.
func (c *Client) attempt(ctx context.Context, r request) (*Response, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var rd io.Reader
	if r.body != nil {
		rd = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url, rd)
	if err != nil {
		return nil, fmt.Errorf("client: building the request to the %s API: %w", r.apiID, err)
	}
	req.Header.Set(wire.HeaderAPIKey, c.key.value)
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.idempotencyKey != "" {
		req.Header.Set(HeaderIdempotencyKey, r.idempotencyKey)
	}
	c.setHeaders(req)
	hr, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: calling the %s API: %w", r.apiID, err)
	}
	defer hr.Body.Close()
	raw, err := c.readBody(hr.Body)
	if err != nil {
		return nil, fmt.Errorf("client: reading the answer of the %s API: %w", r.apiID, err)
	}
	return answer(r.apiID, hr, raw)
}

// setHeaders sets the headers every request carries.
func (c *Client) setHeaders(req *http.Request) {
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderAuthMode, c.authMode)
	req.Header.Set("User-Agent", "tollgate-go-client")
}

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout < 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

// readBody reads at most c.maxBody bytes.
func (c *Client) readBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, c.maxBody+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > c.maxBody {
		return nil, fmt.Errorf("the answer is larger than the %d bytes allowed (Options.MaxResponseBytes)", c.maxBody)
	}
	return b, nil
}
