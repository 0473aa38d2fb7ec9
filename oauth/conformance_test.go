package oauth_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestConformanceAuthorizationServer runs the authorization-server scenarios of the MCP
// conformance suite (@modelcontextprotocol/conformance, "conformance authorization")
// against a server on httptest: the metadata scenario, and the authorization-code grant,
// in which the suite prints an authorization URL, this test plays the person at the
// consent page, and the suite receives the code at its callback and exchanges it.
func TestConformanceAuthorizationServer(t *testing.T) {
	node := testenv.NodeTool(t, "node") // Node 22, from tools/npm
	// The authorization-server scenarios came with the suite's 0.2 line, pinned in
	// tools/npm under an alias beside the 0.1 line the MCP server scenarios use.
	suite := filepath.Join(testenv.Var(t, testenv.NodeTools), "node_modules", "mcp-conformance-next", "dist", "index.js")
	if _, err := os.Stat(suite); err != nil {
		testenv.Unavailable(t, "the conformance suite 0.2 is not installed: %v", err)
	}
	if out, _ := exec.Command(node, suite, "list").CombinedOutput(); !strings.Contains(string(out), "authorization-code-grant") {
		version, _ := exec.Command(node, suite, "--version").Output()
		testenv.Unavailable(t, "the installed conformance suite (%s) has no authorization-server scenarios; they need 0.2.0-alpha.12 or later",
			strings.TrimSpace(string(version)))
	}

	h := newHarness(t)
	port := freePort(t)
	client := h.register(t, fmt.Sprintf("http://127.0.0.1:%d/callback", port))
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "authorization", "--url", h.issuer, "--client-id", client,
		"--resource", h.resource, "--port", strconv.Itoa(port), "--output-dir", out)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "NO_COLOR=1")
	cmd.Stderr = cmd.Stdout
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())

	var log strings.Builder
	// The suite prints the authorization URL and starts its callback server; the test
	// approves once both happened. The suite waits for its callback meanwhile, and its
	// output waits in the pipe.
	var authorizeURL string
	listening, consented := false, false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		switch {
		case strings.HasPrefix(line, h.issuer+"/oauth/authorize?"):
			authorizeURL = line
		case strings.HasPrefix(line, "Callback server started"):
			listening = true
		}
		if authorizeURL != "" && listening && !consented {
			h.approveFor(t, authorizeURL)
			consented = true
		}
	}
	err = cmd.Wait()
	t.Logf("conformance authorization:\n%s", log.String())
	if err != nil {
		t.Fatalf("the suite failed: %v", err)
	}
	if !consented {
		t.Fatal("the suite printed no authorization URL")
	}

	checks := readChecks(t, out)
	for _, want := range []string{"authorization-server-metadata", "authorization-server-metadata-cimd", "authorization-code-grant"} {
		if checks[want] != "SUCCESS" {
			t.Errorf("check %s: %q, want SUCCESS", want, checks[want])
		}
	}
	for id, status := range checks {
		if status != "SUCCESS" {
			t.Errorf("check %s: %s", id, status)
		}
	}
}

// approveFor plays the person at the consent page of an authorization URL, and follows
// the redirect to the client's callback.
func (h *harness) approveFor(t *testing.T, authorizeURL string) {
	t.Helper()
	u, err := url.Parse(authorizeURL)
	must(t, err)
	b := h.browser(t)
	decision := b.submit(t, approved(formOf(t, b.open(t, u.Query())), h.acct.Key))
	if decision.status != http.StatusSeeOther {
		t.Fatalf("approval: %d %s", decision.status, decision.body)
	}
	resp, err := http.Get(decision.header.Get("Location"))
	must(t, err)
	resp.Body.Close()
}

// readChecks returns the status of every check in the suite's result files.
func readChecks(t *testing.T, dir string) map[string]string {
	t.Helper()
	statuses := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(path) != "checks.json" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var checks []struct{ ID, Status string }
		if err := json.Unmarshal(b, &checks); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		for _, c := range checks {
			statuses[c.ID] = c.Status
		}
		return nil
	})
	must(t, err)
	if len(statuses) == 0 {
		t.Fatalf("no checks.json in %s", dir)
	}
	return statuses
}

// freePort returns a loopback TCP port that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
