//go:build unix

package tollgate_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestDocTourAdmin pastes the admin sequence of docs/tour.md into bash as it is written
// but for the address: the server gets a port of its own (-addr) and BASE, which the
// tour's Try it sets, names it, so that the test never binds :8080. go run compiles the server meanwhile, which is what
// the sequence's wait is for. Every request must succeed, and the account must end as
// the page says: active after its suspension, 150 credits, the sub-key rotated and
// revoked. The page's table of admin routes must be the admin package's.
func TestDocTourAdmin(t *testing.T) {
	shellTools(t)
	tour, err := os.ReadFile("docs/tour.md")
	if err != nil {
		t.Fatal(err)
	}
	checkAdminRoutes(t, string(tour))
	tryItSetsBase(t, string(tour))

	block := shellBlock(t, "docs/tour.md", string(tour), "go run ./examples/server -admin-token")
	if strings.Contains(block, "8080") || strings.Contains(block, "localhost") {
		t.Fatalf("the admin block of docs/tour.md names an address rather than $BASE:\n%s", block)
	}
	port := testenv.FreePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	script := fmt.Sprintf("BASE=%s\n", base) + strings.Replace(block, "go run ./examples/server ", fmt.Sprintf("go run ./examples/server -addr 127.0.0.1:%d ", port), 1)
	m := regexp.MustCompile(`(?m)^ADMIN=(\S+)$`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("the admin block of docs/tour.md sets no ADMIN:\n%s", block)
	}
	token := m[1]

	output := runScript(t, script)

	// Each request the block prints is answered with an ok envelope, one a line.
	okAnswers(t, script, output)

	// The account as the block left it.
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/admin/v1/accounts/acme", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var acct struct {
		Data struct {
			Account struct {
				State          string
				StateChangedAt *time.Time `json:"state_changed_at"`
			}
			Balance struct{ Remaining int64 }
			Keys    []struct {
				Name      string
				Revoked   bool
				RotatedAt *time.Time `json:"rotated_at"`
			}
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&acct); err != nil {
		t.Fatal(err)
	}
	if a := acct.Data.Account; a.State != "active" || a.StateChangedAt == nil {
		t.Errorf("acme is %+v, want active again, its state changed by the reactivation", a)
	}
	if acct.Data.Balance.Remaining != 150 {
		t.Errorf("acme has %d credits, want 150 (the free plan's 50 and the grant of 100)", acct.Data.Balance.Remaining)
	}
	var ci bool
	for _, k := range acct.Data.Keys {
		if k.Name == "ci" {
			ci = k.Revoked && k.RotatedAt != nil
		}
	}
	if !ci {
		t.Errorf("acme's keys %+v; want the sub-key ci rotated and revoked", acct.Data.Keys)
	}
}

// TestDocAccountHolders runs the sequence of docs/account-holders.md as it is written
// but for the address, against the example server as the tour's Try it starts it (on a
// port of its own), with BASE set to its address and KEY to the key the server prints.
// Every request that prints its answer must succeed, and those that print their status
// must be refused as the comments say: a sub-key outside its APIs, a rotated-away
// value, a signed-out token, a cookie change without its CSRF token, a signed-out
// cookie. The audit log must then hold every change the sequence made, with the key
// that made it, and no key value.
func TestDocAccountHolders(t *testing.T) {
	page, err := os.ReadFile("docs/account-holders.md")
	if err != nil {
		t.Fatal(err)
	}
	block := shellBlock(t, "docs/account-holders.md", string(page), "/v1/account/usage")
	script, _ := tryIt(t, block)
	output := runScript(t, script)
	okAnswers(t, script, output)

	// The refusals, in the block's order, as its comments give them.
	var want, got []string
	for _, m := range regexp.MustCompile(`(?m)%\{http_code\}.*# (\d{3})$`).FindAllStringSubmatch(block, -1) {
		want = append(want, m[1])
	}
	for _, m := range regexp.MustCompile(`(?m)^(\d{3})$`).FindAllStringSubmatch(output, -1) {
		got = append(got, m[1])
	}
	if len(want) == 0 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the refusals were %v, want %v as the block's comments say:\n%s", got, want, output)
	}

	// The usage answer counts the calls the block made before it.
	var usage struct {
		Data struct {
			Series []struct {
				Points []struct{ Calls int64 }
			}
		}
	}
	for line := range strings.Lines(output) {
		if strings.Contains(line, `"series"`) {
			if err := json.Unmarshal([]byte(line), &usage); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls := int64(0)
	for _, s := range usage.Data.Series {
		for _, p := range s.Points {
			calls += p.Calls
		}
	}
	// The sub-key's call and its refusal, and the call with its new value; the call with
	// the rotated-away value was never authenticated, so it is not the account's.
	if calls != 3 {
		t.Errorf("the usage answer counts %d calls, want 3:\n%s", calls, output)
	}

	// The audit log holds what the block did, and no key value the block saw.
	var audit struct {
		Data struct {
			Entries []struct{ Action, Actor string }
		}
	}
	var auditLine string
	for line := range strings.Lines(output) {
		if strings.Contains(line, `"entries"`) {
			auditLine = line
		}
	}
	if err := json.Unmarshal([]byte(auditLine), &audit); err != nil {
		t.Fatalf("no audit answer in the output: %v\n%s", err, output)
	}
	seen := map[string]bool{}
	for _, e := range audit.Data.Entries {
		if e.Action != "account.create" && (e.Actor == "" || e.Actor == "host") {
			t.Errorf("the entry %+v names no key as its actor", e)
		}
		seen[e.Action] = true
	}
	for _, action := range []string{"key.create", "key.update", "key.rotate", "key.revoke", "session.start", "session.end"} {
		if !seen[action] {
			t.Errorf("the audit log has no %s entry: %s", action, auditLine)
		}
	}
	for _, m := range regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`).FindAllString(output, -1) {
		if strings.Contains(auditLine, m) {
			t.Errorf("the audit log holds the key value %s", m)
		}
	}
}

// tryIt returns the script that runs a block of docs/ as the tour's Try it would: the
// example server started in the background on a port of its own, BASE set to its
// address (which tryIt returns too) and KEY to the key it prints, in an empty directory;
// the block follows. The tour's Try it must set BASE and KEY as the script does.
func tryIt(t *testing.T, block string) (script, base string) {
	t.Helper()
	shellTools(t)
	tour, err := os.ReadFile("docs/tour.md")
	if err != nil {
		t.Fatal(err)
	}
	tryItSetsBase(t, string(tour))
	port := testenv.FreePort(t)
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	serverOut := t.TempDir() + "/server"
	start := fmt.Sprintf(`go run ./examples/server -addr 127.0.0.1:%d > %s 2>&1 &
BASE=%[3]s
until grep -q '^API key: ' %[2]s && curl -sf -o /dev/null $BASE/v1/catalog; do
  kill -0 $! 2>/dev/null || { cat %[2]s; exit 1; }
  sleep 0.2
done
KEY=$(grep '^API key: ' %[2]s | cut -d' ' -f3)
cd "$(mktemp -d)"
`, port, serverOut, base)
	if strings.Contains(block, "8080") || strings.Contains(block, "localhost") {
		t.Fatalf("the block names an address rather than $BASE:\n%s", block)
	}
	return start + block, base
}

// TestDocTourBatch runs the batch sequence of docs/tour.md as it is written but for the
// address, against the example server as Try it starts it: the first batch answers its
// two valid items and the invalid one in order, charging 2; the batch sent twice with
// one Idempotency-Key answers the same UUIDs twice and is charged once; the same key
// with another body is refused with 422. The account then has spent 4 credits.
func TestDocTourBatch(t *testing.T) {
	tour, err := os.ReadFile("docs/tour.md")
	if err != nil {
		t.Fatal(err)
	}
	block := shellBlock(t, "docs/tour.md", string(tour), "/batch")
	script, base := tryIt(t, block)
	output := runScript(t, script+"\ncurl -s -w '\\n' "+base+`/v1/analytics -H "x-api-key: $KEY"`+"\n")
	// The answers, one a line: the first batch, the batch sent twice, the analytics.
	var answers []string
	for line := range strings.Lines(output) {
		if strings.HasPrefix(line, "{") {
			answers = append(answers, strings.TrimSpace(line))
			if !strings.HasPrefix(line, `{"status":"ok","error":null,`) {
				t.Errorf("an answer that is not an ok envelope: %s", line)
			}
		}
	}
	if len(answers) != 4 {
		t.Fatalf("%d answers, want 4:\n%s", len(answers), output)
	}
	type item struct {
		Status, Code string
		Credits      int64
		Data         map[string]any
	}
	var first struct {
		Data struct {
			Items   []item
			Summary struct{ OK, Failed, Credits int64 }
		}
	}
	if err := json.Unmarshal([]byte(answers[0]), &first); err != nil {
		t.Fatal(err)
	}
	items := first.Data.Items
	if len(items) != 3 || items[0].Data["hash"] != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" ||
		items[1].Data["hash"] != "5d41402abc4b2a76b9719d911017c592" || items[2].Code != "invalid_input" ||
		first.Data.Summary != (struct{ OK, Failed, Credits int64 }{2, 1, 2}) {
		t.Errorf("the first batch: %s", answers[0])
	}
	if answers[1] != answers[2] || !strings.Contains(answers[1], `"summary":{"ok":2,"failed":0,"credits":2}`) {
		t.Errorf("the batch sent twice with one key: %s, then %s; want the same answer twice", answers[1], answers[2])
	}
	if !regexp.MustCompile(`(?m)^422$`).MatchString(output) {
		t.Errorf("the key with another body: want 422 in\n%s", output)
	}
	var analytics struct {
		Data struct{ Credits struct{ Used int64 } }
	}
	if err := json.Unmarshal([]byte(answers[3]), &analytics); err != nil || analytics.Data.Credits.Used != 4 {
		t.Errorf("analytics %s: want 4 credits used, the idempotent batch charged once", answers[3])
	}
}

// tryItSetsBase checks that the tour's Try it sets BASE to the example server's default
// address, with KEY, as the blocks that use $BASE assume.
func tryItSetsBase(t *testing.T, tour string) {
	t.Helper()
	set := shellBlock(t, "docs/tour.md", tour, "\nKEY=")
	if !regexp.MustCompile(`(?m)^BASE=http://localhost:8080 `).MatchString(set) {
		t.Fatalf("the tour's Try it sets KEY in a block that sets no BASE=http://localhost:8080:\n%s", set)
	}
}

// shellTools skips (or fails, under CI=true) a test that runs a block of docs/ where
// bash, curl or go is missing.
func shellTools(t *testing.T) {
	t.Helper()
	for _, name := range []string{"bash", "curl", "go"} {
		testenv.Program(t, name)
	}
}

// runScript runs script in bash from the root of the repository (the test's directory)
// and returns what it printed. A server the script starts in the background stays in its process group,
// which is interrupted when the test ends.
func runScript(t *testing.T, script string) string {
	t.Helper()
	bash := testenv.Program(t, "bash")
	// The server stays in the background when bash exits, and writes to the same
	// output: files, not pipes, so that waiting for bash does not wait for it.
	out, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.CommandContext(t.Context(), bash, "-c", script)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // bash, go run and the server
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopGroup(t, cmd.Process.Pid) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(5 * time.Minute): // go run compiling on a busy machine
		err = errors.New("still running after 5 minutes")
	}
	output, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, output)
	}
	return string(output)
}

// okAnswers checks that the script's output holds an ok envelope, one a line, for each
// of its printing requests (curl -s -w '\n').
func okAnswers(t *testing.T, script, output string) {
	t.Helper()
	answers := 0
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var env struct{ Status string }
		if err := json.Unmarshal([]byte(line), &env); err != nil || env.Status != "ok" {
			t.Errorf("an answer that is not an ok envelope: %s", line)
		}
		answers++
	}
	if want := strings.Count(script, "curl -s -w '\\n'"); answers != want || want == 0 {
		t.Errorf("%d answers for %d printing requests:\n%s", answers, want, output)
	}
}

// shellBlock returns the one sh block of the Markdown text of page that contains marker.
func shellBlock(t *testing.T, page, text, marker string) string {
	t.Helper()
	var found []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1) {
		if strings.Contains(m[1], marker) {
			found = append(found, m[1])
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d sh blocks of %s contain %q, want 1", len(found), page, marker)
	}
	return found[0]
}

// checkAdminRoutes checks that the table of admin routes of docs/tour.md lists exactly
// the routes of the admin package's documentation, in its order.
func checkAdminRoutes(t *testing.T, tour string) {
	t.Helper()
	src, err := os.ReadFile("admin/admin.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc, table []string
	for _, m := range regexp.MustCompile(`(?m)^//\t(GET|POST|PUT|PATCH|DELETE) +(/admin/\S+)`).FindAllStringSubmatch(string(src), -1) {
		doc = append(doc, m[1]+" "+m[2])
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:GET|POST|PUT|PATCH|DELETE) /admin/[^`]+)` \\|").FindAllStringSubmatch(tour, -1) {
		table = append(table, m[1])
	}
	if len(doc) == 0 || strings.Join(doc, "\n") != strings.Join(table, "\n") {
		t.Errorf("docs/tour.md lists the admin routes\n%s\nand the admin package\n%s", strings.Join(table, "\n"), strings.Join(doc, "\n"))
	}
}

// stopGroup interrupts the process group pgid (bash, go run and the server it runs),
// as Ctrl-C would: the server shuts down and go run removes what it built. It waits
// for the group to end, and kills it if it has not within 30 seconds.
func stopGroup(t *testing.T, pgid int) {
	if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
		return // the group has ended
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Errorf("the server did not stop on SIGINT; killing it")
			syscall.Kill(-pgid, syscall.SIGKILL)
			return
		}
		time.Sleep(50 * time.Millisecond) // waiting for processes to exit
	}
}

// TestREADMEDependOnClone runs the README's commands for depending on a clone as they are
// written, in a new module whose main is the README's Go block, next to a clone (a link
// to this repository), with GOFLAGS unset and with GOFLAGS=-mod=mod, as the README says.
// go.mod must then hold the lines the README shows, and the module must build.
func TestREADMEDependOnClone(t *testing.T) {
	testenv.Program(t, "bash")
	goTool := testenv.Program(t, "go")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := shellBlock(t, "README.md", string(readme), "go mod edit -replace")
	_, after, _ := strings.Cut(string(readme), block)
	_, want, found := strings.Cut(after, "```text\n")
	want, _, closed := strings.Cut(want, "```")
	if !found || !closed || !strings.Contains(want, "require github.com/tollgate-dev/tollgate ") {
		t.Fatalf("the README shows no go.mod lines (a ```text block with the require) after its block\n%s", block)
	}
	code, _, err := readmeBlocks(string(readme), "## Using the library")
	if err != nil {
		t.Fatal(err)
	}
	imports, err := fileImports("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	main := "package main\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\nfunc main() {\n" + strings.Join(code, "\n") + "\n}\n"
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}

	for _, goflags := range []string{"", "-mod=mod"} {
		t.Run("GOFLAGS="+goflags, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Symlink(root, filepath.Join(dir, "tollgate")); err != nil {
				t.Fatal(err)
			}
			mod := filepath.Join(dir, "host")
			if err := os.Mkdir(mod, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, text := range map[string]string{"go.mod": "module example.com/host\n\ngo 1.25.0\n", "main.go": main} {
				if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			env := append(os.Environ(), "GOFLAGS="+goflags, "GOWORK=off")
			run := func(name string, args ...string) {
				t.Helper()
				cmd := exec.CommandContext(t.Context(), name, args...)
				cmd.Dir, cmd.Env = mod, env
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
				}
			}
			run("bash", "-e", "-c", block)
			run(goTool, "build", "-o", os.DevNull, ".")

			gomod, err := os.ReadFile(filepath.Join(mod, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			have := strings.Split(string(gomod), "\n")
			for line := range strings.Lines(want) {
				if line = strings.TrimSpace(line); line != "" && !slices.Contains(have, line) {
					t.Errorf("go.mod has no line %q, which the README shows:\n%s", line, gomod)
				}
			}
		})
	}
}

// fileImports returns the import specs of the Go file path, as written ("fmt", name
// "path").
func fileImports(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var specs []string
	for _, s := range f.Imports {
		spec := s.Path.Value
		if s.Name != nil {
			spec = s.Name.Name + " " + spec
		}
		specs = append(specs, spec)
	}
	return specs, nil
}
