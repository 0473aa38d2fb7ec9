package clientgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// A liveCase is one call of a generated package, in the terms of every language: the
// JavaScript method names (Python's are their snake_case forms).
type liveCase struct {
	name   string
	api    string
	method string         // execute, executeWithFile or executeWithUrl
	params map[string]any // the parameters, or the fields of a file call
	file   string         // "image" (the test image) or "url" (its address) for file calls
	key    string         // the key; the primary key if empty
	older  bool           // sent to the server's OlderURL, whose answers lack X-Credits-Granted

	// Expectations: a success with data fields and cost, or an error.
	want       map[string]any
	cost       int64
	errClass   string // ValidationError, APIError, TypeError
	param      string // of a ValidationError
	httpStatus int    // of an APIError
	code       string // of an APIError
}

// sent reports whether the case reaches the network.
func (c liveCase) sent() bool { return c.errClass == "" || c.errClass == "APIError" }

// liveCases are the calls every language's packages make against the live server:
// a paid call of every API, the file and URL forms, a validation failure of every API,
// and the refusals.
var liveCases = []liveCase{
	{name: "hash", api: "hash", method: "execute", params: map[string]any{"text": "hello"},
		want: map[string]any{"algorithm": "sha256", "hash": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}, cost: 1},
	{name: "hmac", api: "hmac", method: "execute", params: map[string]any{"message": "hello", "secret": "key", "encoding": "hex"},
		want: map[string]any{"hmac": "9307b3b915efb5171ff14d8cb55fbcc798c6c0ef1456d66ded1a6aa723a58b7b", "algorithm": "sha256"}, cost: 1},
	{name: "uuid-generator", api: "uuid-generator", method: "execute", params: map[string]any{"count": 2},
		want: map[string]any{"count": 2}, cost: 1},
	{name: "date-info", api: "date-info", method: "execute", params: map[string]any{"date": "2024-02-29"},
		want: map[string]any{"day-of-week": "Thursday", "iso:week": 9, "is leap year": true, "1st-of-month": "2024-02-01"}, cost: 1},
	{name: "echo", api: "echo", method: "execute", params: map[string]any{"message": "héllo", "delay_ms": 0},
		want: map[string]any{"message": "héllo", "delay_ms": 0}, cost: 1},
	{name: "image-info file", api: "image-info", method: "executeWithFile", file: "image",
		want: map[string]any{"format": "png", "width": testserver.PNGWidth, "height": testserver.PNGHeight}, cost: 2},
	{name: "image-info url", api: "image-info", method: "executeWithUrl", file: "url",
		want: map[string]any{"format": "png", "width": testserver.PNGWidth}, cost: 2},

	{name: "hash invalid", api: "hash", method: "execute", params: map[string]any{"text": "t", "algorithm": "crc32"}, errClass: "ValidationError", param: "algorithm"},
	{name: "hmac invalid", api: "hmac", method: "execute", params: map[string]any{"message": "m"}, errClass: "ValidationError", param: "secret"},
	{name: "uuid-generator invalid", api: "uuid-generator", method: "execute", params: map[string]any{"count": 0}, errClass: "ValidationError", param: "count"},
	{name: "date-info invalid", api: "date-info", method: "execute", params: map[string]any{"date": "2024/02/29"}, errClass: "ValidationError", param: "date"},
	{name: "echo invalid", api: "echo", method: "execute", params: map[string]any{"message": "m", "delay": 5}, errClass: "ValidationError", param: "delay"},
	{name: "image-info without a file", api: "image-info", method: "execute", errClass: "ValidationError", param: "image"},
	{name: "image-info bad url", api: "image-info", method: "executeWithUrl", params: map[string]any{}, file: "ftp", errClass: "ValidationError", param: "url"},

	{name: "401", api: "hash", method: "execute", params: map[string]any{"text": "a"}, key: testserver.UnknownKey,
		errClass: "APIError", httpStatus: 401, code: "unauthorized"},
	{name: "403", api: "hash", method: "execute", params: map[string]any{"text": "a"}, key: testserver.RestrictedKey,
		errClass: "APIError", httpStatus: 403, code: "forbidden"},
	{name: "429 first call", api: "hash", method: "execute", params: map[string]any{"text": "a"}, key: testserver.RateLimitedKey,
		want: map[string]any{"algorithm": "sha256"}, cost: 1},
	{name: "429 rate limited", api: "hash", method: "execute", params: map[string]any{"text": "a"}, key: testserver.RateLimitedKey,
		errClass: "APIError", httpStatus: 429, code: "rate_limited"},
	{name: "429 no credits", api: "hash", method: "execute", params: map[string]any{"text": "a"}, key: testserver.NoCreditsKey,
		errClass: "APIError", httpStatus: 429, code: "credits_exhausted"},

	// A service older than X-Credits-Granted: acme's grant is not reported, so granted
	// reads 0.
	{name: "older service", api: "hash", method: "execute", params: map[string]any{"text": "hello"}, older: true,
		want: map[string]any{"algorithm": "sha256"}, cost: 1},
}

// baseURL returns the address the case calls: srv's, or for a case of an older
// service the address whose answers lack X-Credits-Granted.
func (c liveCase) baseURL(srv *testserver.Server) string {
	if c.older {
		return srv.OlderURL
	}
	return srv.URL
}

// granted returns the granted credits the case's answer reports.
func (c liveCase) granted() int64 {
	if c.older {
		return 0
	}
	return grantedOf(c.key)
}

// jsCase is a call for testdata/drive.mjs: new Module[Class](Options), then
// Method(...Args), with a callback when Callback is set.
type jsCase struct {
	Name     string         `json:"name"`
	Module   string         `json:"module"`
	Class    string         `json:"class"`
	Options  map[string]any `json:"options"`
	Method   string         `json:"method"`
	Args     []any          `json:"args"`
	Callback bool           `json:"callback,omitempty"`
}

// pyCase is a call for testdata/drive.py: Module.Class(*Args, **Kwargs), then
// Method(*CallArgs).
type pyCase struct {
	Name     string         `json:"name"`
	Module   string         `json:"module"`
	Class    string         `json:"class"`
	Args     []any          `json:"args"`
	Kwargs   map[string]any `json:"kwargs"`
	Method   string         `json:"method"`
	CallArgs []any          `json:"call_args"`
}

// liveResult is what a driver reports of one call.
type liveResult struct {
	Name     string `json:"name"`
	OK       bool   `json:"ok"`
	Stage    string `json:"stage"`
	Response struct {
		Status     string                     `json:"status"`
		Error      any                        `json:"error"`
		Data       map[string]json.RawMessage `json:"data"`
		HTTPStatus int                        `json:"httpStatus"`
		Credits    *liveCredits               `json:"credits"`
		Replayed   *bool                      `json:"replayed"` // of a batch
	} `json:"response"`
	Error struct {
		Class      string `json:"class"`
		IsError    bool   `json:"isError"`
		Message    string `json:"message"`
		Status     string `json:"status"`
		Error      string `json:"error"`
		Data       any    `json:"data"`
		Param      string `json:"param"`
		HTTPStatus int    `json:"httpStatus"`
		Code       string `json:"code"`
		RetryAfter *int   `json:"retryAfter"`
		Index      *int   `json:"index"` // of a ValidationError in a batch
	} `json:"error"`
}

// liveCredits is what a driver reports of an answer's credit headers, as the package
// read them.
type liveCredits struct {
	Cost      int64  `json:"cost"`
	Remaining int64  `json:"remaining"`
	Granted   *int64 `json:"granted"` // nil if the driver reported none
	// Text is the receipt's string form (Java's toString, Python's repr), if the
	// driver reported it.
	Text string `json:"text"`
}

// grantedOf returns the credits that the account of key holds in grants: acme's
// ([testserver.PrimaryGranted]), for the primary key or "" (which stands for it); none
// for the other accounts.
func grantedOf(key string) int64 {
	if key == "" || key == testserver.PrimaryKey {
		return testserver.PrimaryGranted
	}
	return 0
}

// checkCredits checks the receipt of a call that succeeded: what it cost, and the part
// of the balance that grants hold, which the call did not spend (calls spend the
// allowance first).
func checkCredits(t *testing.T, name string, c *liveCredits, cost, granted int64) {
	t.Helper()
	if c == nil || c.Cost != cost || c.Granted == nil || *c.Granted != granted || c.Remaining < granted {
		got, _ := json.Marshal(c)
		t.Errorf("%s: credits %s, want cost %d, %d granted of the balance", name, got, cost, granted)
		return
	}
	if c.Text != "" && !strings.Contains(c.Text, fmt.Sprintf("granted=%d", granted)) {
		t.Errorf("%s: the receipt's text %q does not say granted=%d", name, c.Text, granted)
	}
}

// driverOutput is what a driver prints.
type driverOutput struct {
	Results   []liveResult `json:"results"`
	Unhandled int          `json:"unhandled"`
}

// toolchain skips the test unless the full suite runs ([testenv.Full]): building and
// running the generated packages of lang with its toolchain (node, python3, mcs and
// mono, javac and java, php and composer, the Dart grammar) takes minutes on two cores.
// A plain go test runs the Go packages, and every check of the generated text.
func toolchain(t *testing.T, lang string) {
	t.Helper()
	testenv.SkipUnlessFull(t, "runs the generated %s packages with their toolchain; the Go packages run in every run", lang)
}

// runDriver runs a driver program on the cases and decodes its report.
func runDriver(t *testing.T, cmd *exec.Cmd, cases any) driverOutput {
	t.Helper()
	b, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "cases.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.Args = append(cmd.Args, p)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s\n%s", cmd, err, out, stderr)
	}
	var report driverOutput
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("the driver's report is not JSON: %v\n%s", err, out)
	}
	return report
}

// checkResult compares a driver's result with the case's expectations.
func checkResult(t *testing.T, c liveCase, r liveResult) {
	t.Helper()
	if c.errClass == "" {
		if !r.OK {
			t.Fatalf("%s failed: %+v", c.name, r.Error)
		}
		resp := r.Response
		if resp.Status != "ok" || resp.Error != nil || resp.HTTPStatus != 200 {
			t.Errorf("%s: response %+v, want the ok envelope", c.name, resp)
		}
		for k, want := range c.want {
			var v any
			json.Unmarshal(resp.Data[k], &v) // normalizes escapes, so that the texts compare
			got, _ := json.Marshal(v)
			if w, _ := json.Marshal(want); string(got) != string(w) {
				t.Errorf("%s: data[%q] = %s, want %s", c.name, k, got, w)
			}
		}
		checkCredits(t, c.name, resp.Credits, c.cost, c.granted())
		return
	}
	e := r.Error
	if r.OK || e.Class != c.errClass || !e.IsError {
		t.Fatalf("%s: result %+v, want a %s", c.name, r, c.errClass)
	}
	if e.Status != "error" || e.Error == "" || e.Data != nil || e.Message == "" {
		t.Errorf("%s: error %+v, want status \"error\", the message in error and message, data null", c.name, e)
	}
	switch {
	case strings.HasPrefix(c.errClass, "Validation"):
		if e.Param != c.param || !strings.Contains(e.Message, fmt.Sprintf("parameter %q", c.param)) {
			t.Errorf("%s: error %+v, want one naming %q", c.name, e, c.param)
		}
	default:
		if e.HTTPStatus != c.httpStatus || e.Code != c.code {
			t.Errorf("%s: error %+v, want %d %s", c.name, e, c.httpStatus, c.code)
		}
		if c.code == "rate_limited" && (e.RetryAfter == nil || *e.RetryAfter < 1) {
			t.Errorf("%s: no Retry-After in %+v", c.name, e)
		}
	}
}

// packageDirs returns the directories of the example packages of a language, by API
// id.
func packageDirs(t *testing.T, lang string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range []string{"hash", "hmac", "uuid-generator", "date-info", "echo", "image-info"} {
		dir, err := filepath.Abs(filepath.Join(examplesDir, lang, id))
		if err != nil {
			t.Fatal(err)
		}
		out[id] = dir
	}
	return out
}

// fileArg returns the path or address a file call passes.
func fileArg(srv *testserver.Server, img, kind string) string {
	switch kind {
	case "image":
		return img
	case "url":
		return srv.FileURL
	case "ftp":
		return "ftp://example.com/image.png"
	}
	return ""
}

// readmeBlock returns the first fenced code block of the given language in a README.
func readmeBlock(t *testing.T, path, lang string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no %s code block", path, lang)
	}
	return string(m[1])
}

// checkNetwork checks that exactly the calls that should reach the service did, after
// extra others, with the ecosystem's auth mode.
func checkNetwork[C interface{ sent() bool }](t *testing.T, srv *testserver.Server, cases []C, extra int, mode string) {
	t.Helper()
	want := extra
	for _, c := range cases {
		if c.sent() {
			want++
		}
	}
	if got := srv.APICalls(); got != want {
		t.Errorf("%d calls reached the service, want %d: validation failures must not", got, want)
	}
	for _, m := range srv.AuthModes() {
		if m != mode {
			t.Fatalf("X-Auth-Mode %q, want %s", m, mode)
		}
	}
}

// TestJavaScriptPackages imports the generated JavaScript packages of the sample
// catalog with node and runs every live case, the callback form, the constructor's
// checks and each README's example against a live server.
func TestJavaScriptPackages(t *testing.T) {
	toolchain(t, "JavaScript")
	node := testenv.Program(t, "node")
	srv := testserver.Start(t)
	img := srv.ImageFile(t)
	dirs := packageDirs(t, "js")
	build := func(c liveCase, callback bool) jsCase {
		key := c.key
		if key == "" {
			key = testserver.PrimaryKey
		}
		args := []any{}
		if c.file != "" {
			args = append(args, fileArg(srv, img, c.file))
		}
		if c.params != nil || c.file == "" {
			args = append(args, c.params)
		}
		return jsCase{Name: c.name, Module: filepath.Join(dirs[c.api], "index.js"), Class: pascal(c.api) + "Client",
			Options: map[string]any{"api_key": key, "base_url": c.baseURL(srv)}, Method: c.method, Args: args, Callback: callback}
	}
	var cases []jsCase
	var expect []liveCase
	for _, c := range liveCases {
		cases, expect = append(cases, build(c, false)), append(expect, c)
	}
	for _, c := range []liveCase{liveCases[0], liveCases[7]} { // a success and a failure, by callback
		c.name += " (callback)"
		cases, expect = append(cases, build(c, true)), append(expect, c)
	}
	for _, opts := range []map[string]any{{"apiKey": testserver.PrimaryKey}, {}, {"api_key": "undefined"}} {
		c := build(liveCases[0], false)
		c.Name, c.Options = fmt.Sprintf("constructor %v", opts), opts
		cases, expect = append(cases, c), append(expect, liveCase{name: c.Name, errClass: "TypeError"})
	}
	report := runDriver(t, exec.CommandContext(t.Context(), node, "testdata/drive.mjs"), cases)
	if len(report.Results) != len(expect) || report.Unhandled != 0 {
		t.Fatalf("%d results and %d unhandled rejections, want %d and none", len(report.Results), report.Unhandled, len(expect))
	}
	for i, c := range expect {
		t.Run(c.name, func(t *testing.T) {
			if c.errClass == "TypeError" {
				if r := report.Results[i]; r.OK || r.Stage != "constructor" || r.Error.Class != "TypeError" || !strings.Contains(r.Error.Message, "api_key") {
					t.Errorf("result %+v, want a TypeError about api_key from the constructor", r)
				}
				return
			}
			checkResult(t, c, report.Results[i])
		})
	}
	checkNetwork(t, srv, expect, 0, "js-package")

	// Batches.
	bcases := batchCases(srv)
	var batches []jsCase
	for _, c := range bcases {
		args := []any{c.items}
		if c.idempotencyKey != "" {
			args = append(args, map[string]any{"idempotencyKey": c.idempotencyKey})
		}
		batches = append(batches, jsCase{Name: c.name, Module: filepath.Join(dirs[c.api], "index.js"), Class: pascal(c.api) + "Client",
			Options: map[string]any{"api_key": c.accountKey(), "base_url": srv.URL}, Method: "executeBatch", Args: args})
	}
	before, balance := srv.APICalls(), srv.Balance(t, "acme")
	report = runDriver(t, exec.CommandContext(t.Context(), node, "testdata/drive.mjs"), batches)
	checkBatchReport(t, srv, bcases, report, "ValidationError", "APIError", balance)
	checkNetwork(t, srv, bcases, before, "js-package")

	// Each README's example, run as written: the package is installed under its npm
	// name, and fetch is pointed at the test server instead of the default base URL.
	for id, dir := range dirs {
		t.Run("README "+id, func(t *testing.T) {
			work := t.TempDir()
			scope := filepath.Join(work, "node_modules", "@tollgate")
			if err := os.MkdirAll(scope, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(dir, filepath.Join(scope, id)); err != nil {
				t.Fatal(err)
			}
			example := filepath.Join(work, "example.mjs")
			if err := os.WriteFile(example, []byte(readmeBlock(t, filepath.Join(dir, "README.md"), "js")), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, "photo.png"), srv.PNG, 0o600); err != nil {
				t.Fatal(err)
			}
			redirect := fmt.Sprintf(`const f = globalThis.fetch; globalThis.fetch = (u, o) => f(String(u).replace(%q, %q), o);`, defaultBaseURL, srv.URL)
			cmd := exec.CommandContext(t.Context(), node, "--import", "data:text/javascript,"+redirect, example)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "TOLLGATE_API_KEY="+testserver.PrimaryKey)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "credits left:") {
				t.Errorf("the README example of %s: %v\n%s", id, err, out)
			}
		})
	}
}

// TestTypeScriptDeclarations type-checks the declarations of the generated packages
// with tsc --strict, through a program that uses them correctly and, marked with
// @ts-expect-error, wrongly: so the declarations are checked to be both valid and
// precise.
func TestTypeScriptDeclarations(t *testing.T) {
	toolchain(t, "TypeScript")
	tsc := testenv.NodeTool(t, "tsc")
	dirs := packageDirs(t, "js")
	work := t.TempDir()
	imp := func(id string) string { return filepath.ToSlash(filepath.Join(dirs[id], "index.js")) }
	program := fmt.Sprintf(`import { HashClient, APIError, ValidationError, type HashResult } from %q;
import { ImageInfoClient } from %q;
import DateInfoClient from %q;

const client = new HashClient({ api_key: 'k', base_url: 'http://localhost:8080', timeout: 1000 });
const r = await client.execute({ text: 'hello', algorithm: 'md5' });
const hash: string = r.data.hash;
const result: HashResult = r.data;
const remaining: number | undefined = r.credits?.remaining;
client.execute({ text: 'x' }, (err, res) => {
  if (err instanceof APIError) console.log(err.httpStatus, err.code, err.error, err.status);
  else if (err instanceof ValidationError) console.log(err.param, err.message);
  else console.log(res?.data.hash);
});
const images = new ImageInfoClient({ api_key: 'k' });
const info = await images.executeWithFile('photo.png');
const width: number = info.data.width;
await images.executeWithUrl('https://example.com/a.png', {});
const dates = new DateInfoClient({ api_key: 'k' });
const leap: boolean = (await dates.execute({ date: '2024-02-29' })).data['is leap year'];
console.log(hash, result, remaining, width, leap);
const batch = await client.executeBatch([{ text: 'a' }, { text: 'b', algorithm: 'md5' }], { idempotencyKey: 'job-1' });
for (const item of batch.data.items) {
  if (item.status === 'ok') console.log(item.data.hash, item.credits);
  else console.log(item.code, item.error);
}
const spent: number = batch.data.summary.credits + (batch.credits?.cost ?? 0);
const replayed: boolean = batch.replayed;
await images.executeBatch([{ url: 'https://example.com/a.png' }]);
client.executeBatch([{ text: 'a' }], (err, res) => console.log(err instanceof ValidationError ? err.index : res?.data.summary.ok));
console.log(spent, replayed);

// @ts-expect-error the option is api_key
new HashClient({ apiKey: 'k' });
// @ts-expect-error text is required
await client.execute({});
// @ts-expect-error algorithm is one of the enum's values
await client.execute({ text: 'x', algorithm: 'crc32' });
// @ts-expect-error hash takes no file
await client.executeWithFile('a.png');
// @ts-expect-error the result has no such field
console.log(r.data.digest);
// @ts-expect-error a batch's items are the API's parameters
await client.executeBatch([{ txt: 'a' }]);
// @ts-expect-error a file API's batch takes the URL form: each item gives its url
await images.executeBatch([{}]);
// @ts-expect-error the option is idempotencyKey
await client.executeBatch([{ text: 'a' }], { key: 'k' });
// @ts-expect-error a failed item's data is null
console.log((await client.executeBatch([{ text: 'a' }])).data.items[0].data.hash);
`, imp("hash"), imp("image-info"), imp("date-info"))
	if err := os.WriteFile(filepath.Join(work, "check.ts"), []byte(program), 0o600); err != nil {
		t.Fatal(err)
	}
	config := `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022", "module": "nodenext",
  "moduleResolution": "nodenext", "types": [], "skipLibCheck": false, "allowJs": false},
  "files": ["check.ts"]}`
	if err := os.WriteFile(filepath.Join(work, "tsconfig.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "package.json"), []byte(`{"type": "module"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every package's declarations, not only the three the program imports.
	var decls []string
	for _, dir := range dirs {
		decls = append(decls, filepath.Join(dir, "index.d.ts"))
	}
	for _, args := range [][]string{{"-p", work}, append([]string{"--noEmit", "--strict"}, decls...)} {
		cmd := exec.CommandContext(t.Context(), tsc, args...)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("tsc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestPythonPackages imports the generated Python packages of the sample catalog with
// python3 and runs every live case, the constructor's checks and each README's example
// against a live server. It also checks that the code parses as Python 3.9.
func TestPythonPackages(t *testing.T) {
	toolchain(t, "Python")
	python := testenv.Program(t, "python3")
	srv := testserver.Start(t)
	img := srv.ImageFile(t)
	dirs := packageDirs(t, "python")
	var pythonPath []string
	for _, dir := range dirs {
		pythonPath = append(pythonPath, dir)
	}
	env := append(os.Environ(), "PYTHONPATH="+strings.Join(pythonPath, string(os.PathListSeparator)), "PYTHONDONTWRITEBYTECODE=1")
	snake := map[string]string{"execute": "execute", "executeWithFile": "execute_with_file", "executeWithUrl": "execute_with_url"}
	build := func(c liveCase) pyCase {
		key := c.key
		if key == "" {
			key = testserver.PrimaryKey
		}
		var args []any
		if c.file != "" {
			args = append(args, fileArg(srv, img, c.file))
		}
		if c.params != nil || c.file == "" {
			args = append(args, c.params)
		}
		return pyCase{Name: c.name, Module: "tollgate_" + strings.ReplaceAll(c.api, "-", "_"), Class: pascal(c.api) + "Client",
			Args: []any{key}, Kwargs: map[string]any{"base_url": c.baseURL(srv)}, Method: snake[c.method], CallArgs: args}
	}
	var cases []pyCase
	for _, c := range liveCases {
		cases = append(cases, build(c))
	}
	ctorCases := []struct {
		args   []any
		kwargs map[string]any
		class  string
	}{
		{nil, map[string]any{"apiKey": testserver.PrimaryKey}, "TypeError"},
		{[]any{""}, nil, "TypeError"},
		{[]any{"undefined"}, nil, "ValueError"},
	}
	for _, cc := range ctorCases {
		c := build(liveCases[0])
		c.Name, c.Args, c.Kwargs = fmt.Sprintf("constructor %v %v", cc.args, cc.kwargs), cc.args, cc.kwargs
		cases = append(cases, c)
	}
	cmd := exec.CommandContext(t.Context(), python, "testdata/drive.py")
	cmd.Env = env
	report := runDriver(t, cmd, cases)
	if len(report.Results) != len(cases) {
		t.Fatalf("%d results, want %d", len(report.Results), len(cases))
	}
	for i, c := range liveCases {
		t.Run(c.name, func(t *testing.T) { checkResult(t, c, report.Results[i]) })
	}
	for i, cc := range ctorCases {
		r := report.Results[len(liveCases)+i]
		if r.OK || r.Stage != "constructor" || r.Error.Class != cc.class {
			t.Errorf("%s: %+v, want a %s from the constructor", r.Name, r, cc.class)
		}
	}
	checkNetwork(t, srv, liveCases, 0, "python-package")

	// Batches.
	bcases := batchCases(srv)
	var batches []pyCase
	for _, c := range bcases {
		batches = append(batches, pyCase{Name: c.name, Module: "tollgate_" + strings.ReplaceAll(c.api, "-", "_"), Class: pascal(c.api) + "Client",
			Args: []any{c.accountKey()}, Kwargs: map[string]any{"base_url": srv.URL}, Method: "execute_batch", CallArgs: batchArgs(c)})
	}
	before, balance := srv.APICalls(), srv.Balance(t, "acme")
	cmd = exec.CommandContext(t.Context(), python, "testdata/drive.py")
	cmd.Env = env
	checkBatchReport(t, srv, bcases, runDriver(t, cmd, batches), "ValidationError", "APIError", balance)
	checkNetwork(t, srv, bcases, before, "python-package")

	// Each README's example, run as written, with the module's default base URL
	// pointed at the test server.
	for id, dir := range dirs {
		t.Run("README "+id, func(t *testing.T) {
			work := t.TempDir()
			example := filepath.Join(work, "example.py")
			if err := os.WriteFile(example, []byte(readmeBlock(t, filepath.Join(dir, "README.md"), "python")), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, "photo.png"), srv.PNG, 0o600); err != nil {
				t.Fatal(err)
			}
			module := "tollgate_" + strings.ReplaceAll(id, "-", "_")
			runner := fmt.Sprintf("import runpy, %s.client as c; c.DEFAULT_BASE_URL = %q; runpy.run_path(%q, run_name='__main__')", module, srv.URL, example)
			cmd := exec.CommandContext(t.Context(), python, "-c", runner)
			cmd.Dir = work
			cmd.Env = append(env, "TOLLGATE_API_KEY="+testserver.PrimaryKey)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "credits left:") {
				t.Errorf("the README example of %s: %v\n%s", id, err, out)
			}
		})
	}

	// The packages declare Python 3.9: their code must parse as such.
	check := `import ast, sys
for path in sys.argv[1:]:
    with open(path) as f:
        ast.parse(f.read(), filename=path, feature_version=(3, 9))
`
	var files []string
	for _, dir := range dirs {
		matches, _ := filepath.Glob(filepath.Join(dir, "*", "*.py"))
		files = append(files, matches...)
	}
	if out, err := exec.CommandContext(t.Context(), python, append([]string{"-c", check}, files...)...).CombinedOutput(); err != nil {
		t.Errorf("the packages do not parse as Python 3.9: %v\n%s", err, out)
	}
}

// callArgs returns the arguments of a live case's call: the parameters, or for a file
// call the path or address of the file and the fields (when the case has any).
func callArgs(srv *testserver.Server, img string, c liveCase) []any {
	args := []any{}
	if c.file != "" {
		args = append(args, fileArg(srv, img, c.file))
	}
	if c.params != nil || c.file == "" {
		args = append(args, c.params)
	}
	return args
}

// A typedCase is a call for the drivers of the typed languages (testdata/Drive.java,
// testdata/Drive.cs, testdata/drive.php): construct Class with Key and BaseURL, then
// call Method(...Args).
type typedCase struct {
	Name    string `json:"name"`
	Class   string `json:"class"`
	Key     string `json:"key"`
	BaseURL string `json:"baseUrl"`
	Method  string `json:"method"`
	Args    []any  `json:"args"`
}

// typedCtorCases are the constructor calls every typed language must refuse: no key, a
// key that is not UUID-shaped, a base URL that is not http or https.
var typedCtorCases = []struct{ key, baseURL string }{
	{"", ""},
	{"undefined", ""},
	{testserver.PrimaryKey, "ftp://example.com"},
}

// typedCases returns the live cases, then the constructor cases, for a typed
// language's driver; class names the client class of an API, method the name of a
// method (execute, executeWithFile, executeWithUrl) in the language.
func typedCases(srv *testserver.Server, img string, class, method func(string) string) []typedCase {
	var cases []typedCase
	for _, c := range liveCases {
		key := c.key
		if key == "" {
			key = testserver.PrimaryKey
		}
		args := callArgs(srv, img, c)
		if c.file != "" && len(args) == 1 {
			args = append(args, nil)
		}
		cases = append(cases, typedCase{c.name, class(c.api), key, c.baseURL(srv), method(c.method), args})
	}
	for _, cc := range typedCtorCases {
		base := cc.baseURL
		if base == "" {
			base = srv.URL
		}
		cases = append(cases, typedCase{fmt.Sprintf("constructor %q %q", cc.key, cc.baseURL), class("hash"), cc.key, base, method("execute"),
			[]any{map[string]any{"text": "a"}}})
	}
	return cases
}

// checkTypedReport checks a typed language's driver report on typedCases: every live
// case as [checkResult] does, with the language's names of ValidationError and
// APIError, and every constructor case refused with ctorClass.
func checkTypedReport(t *testing.T, report driverOutput, validationClass, apiClass, ctorClass string) {
	t.Helper()
	if len(report.Results) != len(liveCases)+len(typedCtorCases) {
		t.Fatalf("%d results, want %d", len(report.Results), len(liveCases)+len(typedCtorCases))
	}
	for i, c := range liveCases {
		switch c.errClass {
		case "ValidationError":
			c.errClass = validationClass
		case "APIError":
			c.errClass = apiClass
		}
		t.Run(c.name, func(t *testing.T) { checkResult(t, c, report.Results[i]) })
	}
	for _, r := range report.Results[len(liveCases):] {
		if r.OK || r.Stage != "constructor" || r.Error.Class != ctorClass {
			t.Errorf("%s: %+v, want a %s from the constructor", r.Name, r, ctorClass)
		}
	}
}

// generateExamples generates the example packages of one language into a temporary
// directory, as examples/clients has them but calling baseURL by default, so that each
// README's example runs as written against a test server.
func generateExamples(t *testing.T, lang, baseURL string) string {
	t.Helper()
	out := t.TempDir()
	var stderr bytes.Buffer
	if code := Run(t.Context(), append(examplesArgs(out), "-lang", lang, "-base-url", baseURL), io.Discard, &stderr); code != 0 {
		t.Fatalf("tollgate-gen: exit %d: %s", code, stderr.String())
	}
	return filepath.Join(out, lang)
}

// readmeWork returns a directory holding a README's example, written to file, and the
// photo.png the examples of file APIs upload.
func readmeWork(t *testing.T, srv *testserver.Server, readme, lang, file string) string {
	t.Helper()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, file), []byte(readmeBlock(t, readme, lang)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "photo.png"), srv.PNG, 0o600); err != nil {
		t.Fatal(err)
	}
	return work
}
