package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// TestDefaultUsage checks that the help of the default brand is Tollgate's, byte for
// byte.
func TestDefaultUsage(t *testing.T) {
	const want = `Usage:
  tollgate <api_id> --<name> <value> ...   call an API (also --name=value)
  tollgate <api_id> --file PATH ...        call a file API with a local file
  tollgate <api_id> --url URL ...          call a file API with the file's address
  tollgate <api_id> --batch FILE           call an API once per line of FILE, a JSON
                                           object of parameters (- for standard input)
  tollgate <api_id> --help                 show the API's parameters, rules and cost
  tollgate list                            list the APIs of the catalog

Environment:
  TOLLGATE_API_KEY    the key of your account (required to call an API)
  TOLLGATE_BASE_URL   the service (default http://localhost:8080)
`
	if got := usage(brand.Default()); got != want {
		t.Errorf("usage:\n%s\nwant\n%s", got, want)
	}
}

// TestBrandedCommand builds a host's command with a brand of its own, as the package
// documentation shows (testdata/acme), and runs it against a live server: it reads
// ACME_API_KEY and ACME_BASE_URL, never Tollgate's variables, and names itself acme.
// A command built with a brand Check refuses exits with 2 before it reads anything.
func TestBrandedCommand(t *testing.T) {
	srv := testserver.Start(t)
	bin := t.TempDir()
	for _, name := range []string{"acme", "badbrand"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./testdata/"+name).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", name, err, out)
		}
	}
	// The environment of the runs: the process's, without any variable of either brand.
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ACME_") && !strings.HasPrefix(kv, "TOLLGATE_") {
			base = append(base, kv)
		}
	}
	run := func(name string, env []string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), filepath.Join(bin, name), args...)
		cmd.Env = append(append([]string{}, base...), env...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stdout.String()+stderr.String(), testserver.PrimaryKey) {
			t.Errorf("%s %q printed the key", name, args)
		}
		return code, stdout.String(), stderr.String()
	}
	acme := []string{"ACME_API_KEY=" + testserver.PrimaryKey, "ACME_BASE_URL=" + srv.URL}
	tollgate := []string{"TOLLGATE_API_KEY=" + testserver.PrimaryKey, "TOLLGATE_BASE_URL=" + srv.URL}

	if code, stdout, stderr := run("acme", acme, "hash", "--text", "hello"); code != 0 || !strings.Contains(stdout, `"status":"ok"`) ||
		!strings.Contains(stdout, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824") {
		t.Errorf("acme hash with ACME_API_KEY: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := run("acme", acme, "list"); code != 0 || !strings.Contains(stdout, "uuid-generator") {
		t.Errorf("acme list: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Tollgate's variables are not read: without ACME_API_KEY there is no key, and
	// without ACME_BASE_URL the service is the default address, not the server.
	code, stdout, stderr := run("acme", append(tollgate, "ACME_BASE_URL="+srv.URL), "hash", "--text", "hello")
	if want := "acme: ACME_API_KEY is not set: export the key of your account, as in\n  export ACME_API_KEY=<your key>\n(`acme hash --help` works without it)\n"; code != 2 || stdout != "" || stderr != want {
		t.Errorf("acme with TOLLGATE_API_KEY only: exit %d\n%s\n%s\nwant exit 2 and %q", code, stdout, stderr, want)
	}
	if code, _, stderr := run("acme", append(tollgate, "ACME_API_KEY="+testserver.PrimaryKey), "list"); code != 1 ||
		strings.Contains(stderr, srv.URL) || !strings.Contains(stderr, "Set ACME_BASE_URL to its address") {
		t.Errorf("acme with TOLLGATE_BASE_URL only: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr = run("acme", nil, "--help")
	for _, want := range []string{"acme <api_id> --<name> <value> ...   call an API", "acme list", "ACME_API_KEY    the key of your account", "ACME_BASE_URL   the service"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("acme --help: exit %d, lacks %q:\n%s%s", code, want, stdout, stderr)
		}
	}
	if code, stdout, _ := run("acme", acme, "hash", "--help"); code != 0 || !strings.Contains(stdout, "Usage: acme hash --text STRING") {
		t.Errorf("acme hash --help: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := run("acme", acme, "no-such-api"); code != 2 || !strings.HasPrefix(stderr, "acme: ") || !strings.HasSuffix(stderr, "lists them, and so does `acme list`\n") {
		t.Errorf("acme no-such-api: exit %d\n%s", code, stderr)
	}
	for _, out := range []string{stdout, stderr} {
		if strings.Contains(strings.ToLower(out), "tollgate") {
			t.Errorf("the acme command names Tollgate:\n%s", out)
		}
	}

	code, stdout, stderr = run("badbrand", acme, "hash", "--text", "hello")
	if code != 2 || stdout != "" || !strings.Contains(stderr, `the Command "acme cli" is not allowed`) {
		t.Errorf("a command with an invalid brand: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
