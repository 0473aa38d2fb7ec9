package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// The variables of the default brand, which most tests run the command with.
var (
	envKey     = brand.Default().KeyVar()
	envBaseURL = brand.Default().BaseURLVar()
)

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
}

// runWith runs the command with args and the given environment.
func runWith(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return runSys(t, system{getenv: func(k string) string { return env[k] }}, args...)
}

// runSys runs the command of the default brand with args and sys, whose outputs are
// replaced by buffers.
func runSys(t *testing.T, sys system, args ...string) result {
	t.Helper()
	return runBrand(t, brand.Default(), sys, args...)
}

// runBrand runs the command of brand b with args and sys, whose outputs are replaced
// by buffers.
func runBrand(t *testing.T, b brand.Brand, sys system, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	sys.stdout, sys.stderr = &stdout, &stderr
	code := run(t.Context(), b, args, sys)
	r := result{code, stdout.String(), stderr.String()}
	for _, key := range []string{testserver.PrimaryKey, testserver.UnknownKey, testserver.RestrictedKey, testserver.RateLimitedKey, testserver.NoCreditsKey} {
		if strings.Contains(r.stdout+r.stderr, key) {
			t.Errorf("tollgate %q printed a key:\n%s\n%s", args, r.stdout, r.stderr)
		}
	}
	return r
}

// envelope decodes the envelope the command printed.
func (r result) envelope(t *testing.T) (status, message string, data map[string]any) {
	t.Helper()
	var env struct {
		Status string         `json:"status"`
		Error  *string        `json:"error"`
		Data   map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &env); err != nil {
		t.Fatalf("stdout is not an envelope: %v\n%s", err, r.stdout)
	}
	if env.Error != nil {
		message = *env.Error
	}
	return env.Status, message, env.Data
}

// TestCalls calls every API of the sample catalog, in every form, against a live
// server, and checks the printed envelope and the exit status.
func TestCalls(t *testing.T) {
	srv := testserver.Start(t)
	env := map[string]string{envKey: testserver.PrimaryKey, envBaseURL: srv.URL}
	img := srv.ImageFile(t)
	tests := []struct {
		name string
		args []string
		want map[string]string // fields of data, formatted with %v
	}{
		{"hash", []string{"hash", "--text", "hello"}, map[string]string{"algorithm": "sha256", "hash": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}},
		{"hash with =", []string{"hash", "--text=a=b", "--algorithm=md5"}, map[string]string{"algorithm": "md5"}},
		{"value that starts with --", []string{"echo", "--message=--not-an-option"}, map[string]string{"message": "--not-an-option"}},
		{"hmac", []string{"hmac", "--message", "hello", "--secret", "key", "--encoding", "hex"}, map[string]string{"algorithm": "sha256", "encoding": "hex"}},
		{"uuid-generator", []string{"uuid-generator", "--count", "4"}, map[string]string{"count": "4"}},
		{"uuid-generator default", []string{"uuid-generator"}, map[string]string{"count": "1"}},
		{"date-info", []string{"date-info", "--date", "2024-02-29"}, map[string]string{"day-of-week": "Thursday", "is leap year": "true", "iso:week": "9"}},
		{"echo", []string{"echo", "--message", "hi there", "--delay_ms", "0"}, map[string]string{"message": "hi there", "delay_ms": "0"}},
		{"image-info --file", []string{"image-info", "--file", img}, map[string]string{"format": "png", "width": "7", "height": "5"}},
		{"image-info --image", []string{"image-info", "--image=" + img}, map[string]string{"format": "png"}},
		{"image-info --url", []string{"image-info", "--url", srv.FileURL}, map[string]string{"format": "png", "bytes": "" /* any */}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runWith(t, env, tt.args...)
			if r.code != exitOK || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q, stdout %s", r.code, r.stderr, r.stdout)
			}
			status, _, data := r.envelope(t)
			if status != "ok" {
				t.Errorf("status %q", status)
			}
			for k, want := range tt.want {
				got, ok := data[k]
				if !ok || (want != "" && strings.TrimSpace(jsonString(got)) != want) {
					t.Errorf("data[%q] = %v, want %s (stdout %s)", k, got, want, r.stdout)
				}
			}
		})
	}
	for _, m := range srv.AuthModes() {
		if m != "cli" {
			t.Fatalf("X-Auth-Mode %q, want cli", m)
		}
	}
	if got, want := srv.APICalls(), len(tests); got != want {
		t.Errorf("%d calls reached the service, want %d", got, want)
	}
}

func jsonString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMistakes checks that usage and validation mistakes exit with 2, say what to fix,
// and never reach the APIs.
func TestMistakes(t *testing.T) {
	srv := testserver.Start(t)
	env := map[string]string{envKey: testserver.PrimaryKey, envBaseURL: srv.URL}
	img := srv.ImageFile(t)
	tests := []struct {
		name   string
		env    map[string]string
		args   []string
		stderr string // a fragment
	}{
		{"no arguments", env, nil, "Usage:"},
		{"no key", map[string]string{envBaseURL: srv.URL}, []string{"hash", "--text", "a"}, "TOLLGATE_API_KEY is not set"},
		{"malformed key", map[string]string{envKey: "undefined", envBaseURL: srv.URL}, []string{"hash", "--text", "a"}, "not UUID-shaped"},
		{"bad base URL", map[string]string{envKey: testserver.PrimaryKey, envBaseURL: "localhost:8080"}, []string{"hash", "--text", "a"}, "http or https"},
		{"unknown API", env, []string{"hsh", "--text", "a"}, `unknown API "hsh"`},
		{"option first", env, []string{"--text", "a"}, "the first argument is the API id"},
		{"unknown option", env, []string{"hash", "--txt", "a"}, "no parameter --txt; it takes --text, --algorithm"},
		{"stray argument", env, []string{"hash", "hello"}, `unexpected argument "hello"`},
		{"missing value", env, []string{"hash", "--text"}, "--text needs a value"},
		{"required", env, []string{"hash"}, `parameter "text": is required`},
		{"type", env, []string{"uuid-generator", "--count", "many"}, `parameter "count": must be an integer, got "many"`},
		{"range", env, []string{"uuid-generator", "--count", "0"}, `parameter "count": must be at least 1`},
		{"length", env, []string{"hash", "--text", strings.Repeat("x", 10001)}, "at most 10000 characters"},
		{"enum", env, []string{"hmac", "--message", "m", "--secret", "s", "--encoding", "hex64"}, "must be one of hex, base64"},
		{"format", env, []string{"date-info", "--date", "2024-2-29"}, "YYYY-MM-DD"},
		{"given twice", env, []string{"hash", "--text", "a", "--text", "b"}, "given 2 times"},
		{"file API without a file", env, []string{"image-info"}, "needs a file: give --file PATH"},
		{"file and url", env, []string{"image-info", "--file", img, "--url", srv.FileURL}, "either --file or --url"},
		{"file of the wrong type", env, []string{"image-info", "--file", "main.go"}, "is text/plain"},
		{"url not http", env, []string{"image-info", "--url", "file:///etc/passwd"}, "http or https URL"},
		{"file to an API without files", env, []string{"hash", "--text", "a", "--file", img}, "no parameter --file"},
		{"list with arguments", env, []string{"list", "all"}, "list takes no arguments"},
		{"help of an unknown API", env, []string{"help", "hsh"}, `no API "hsh"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runWith(t, tt.env, tt.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", r.code, r.stderr, tt.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
	if n := srv.APICalls(); n != 0 {
		t.Errorf("%d requests reached the APIs, want none", n)
	}
}

// TestRefusals checks that the service's refusals exit with 1, print the error
// envelope and say what happened.
func TestRefusals(t *testing.T) {
	srv := testserver.Start(t)
	limited := map[string]string{envKey: testserver.RateLimitedKey, envBaseURL: srv.URL}
	if r := runWith(t, limited, "hash", "--text", "a"); r.code != exitOK {
		t.Fatalf("first call of the rate-limited key: exit %d %s", r.code, r.stderr)
	}
	tests := []struct {
		name   string
		key    string
		args   []string
		stderr []string
	}{
		{"401", testserver.UnknownKey, []string{"hash", "--text", "a"}, []string{"answered 401 (unauthorized)", "not a key of this service"}},
		{"403", testserver.RestrictedKey, []string{"hash", "--text", "a"}, []string{"answered 403 (forbidden)"}},
		{"429 rate limited", testserver.RateLimitedKey, []string{"hash", "--text", "a"}, []string{"answered 429 (rate_limited)"}},
		{"429 no credits", testserver.NoCreditsKey, []string{"hash", "--text", "a"}, []string{"answered 429 (credits_exhausted)"}},
		{"400 rejected", testserver.PrimaryKey, []string{"date-info", "--date", "2026-02-30"}, []string{"answered 400 (rejected)", "does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runWith(t, map[string]string{envKey: tt.key, envBaseURL: srv.URL}, tt.args...)
			if r.code != exitAPI {
				t.Errorf("exit %d, want 1", r.code)
			}
			status, message, data := r.envelope(t)
			if status != "error" || message == "" || data != nil {
				t.Errorf("envelope %s, want an error envelope", r.stdout)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr %q, want %q", r.stderr, s)
				}
			}
		})
	}
	t.Run("no service", func(t *testing.T) {
		r := runWith(t, map[string]string{envKey: testserver.PrimaryKey, envBaseURL: "http://127.0.0.1:1"}, "hash", "--text", "a")
		if r.code != exitAPI || !strings.Contains(r.stderr, "cannot read the catalog") || r.stdout != "" {
			t.Errorf("exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
		}
	})
}

// TestListAndHelp checks the listing and the help of each API, which need no key.
func TestListAndHelp(t *testing.T) {
	srv := testserver.Start(t)
	env := map[string]string{envBaseURL: srv.URL}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"list"}, []string{"API  ", "date-info", "echo", "hash            GET          1     Hash", "image-info      POST (file)  2     Image info", "uuid-generator"}},
		{[]string{"--help"}, []string{"Usage:", "TOLLGATE_API_KEY", "TOLLGATE_BASE_URL"}},
		{[]string{"hash", "--help"}, []string{
			"hash: Hash", "Cost: 1 credit per call (GET /v1/hash).",
			"Usage: tollgate hash --text STRING [--algorithm STRING]",
			"--text       string; required; at most 10000 characters. The text to hash. Example: hello",
			"--algorithm  string; one of md5, sha1, sha256, sha512; default sha256. The hash function.",
		}},
		{[]string{"help", "uuid-generator"}, []string{"--count  integer; 1 to 100; default 1."}},
		{[]string{"date-info", "-h"}, []string{"format date (YYYY-MM-DD)"}},
		{[]string{"image-info", "--help"}, []string{
			"Cost: 2 credits per call", "tollgate image-info (--file PATH | --url URL)",
			"--file PATH  image: image/png, image/jpeg, image/gif, at most 5 MiB (also --image PATH)", "--url URL",
		}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runWith(t, env, tt.args...)
			if r.code != exitOK || r.stderr != "" {
				t.Fatalf("exit %d stderr %q", r.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}
	if n := srv.APICalls(); n != 0 {
		t.Errorf("%d requests reached the APIs, want none", n)
	}
}
