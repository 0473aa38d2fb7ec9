package mcp_test

// Real clients against the handler: the official TypeScript SDK, the MCP Inspector's
// CLI and the conformance suite, all pinned in tools/npm and run with the Node 22 that
// tools/npm also pins. Where they are not installed the tests skip, or fail under
// CI=true (see internal/testenv).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// nodeCmd returns a command that runs a Node program from the tools directory, with a
// scratch HOME (the Inspector writes ~/.mcp-inspector).
func nodeCmd(t *testing.T, dir, node string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "NO_COLOR=1")
	return cmd
}

// TestTypeScriptSDK drives the handler with the official TypeScript SDK
// (@modelcontextprotocol/sdk, tools/npm/mcp-client.mjs): it connects with a key
// header, lists the tools, calls hash and date-info (the SDK checks the structured
// results against the output schemas), gets isError for bad arguments and -32602 for
// an unknown tool, is refused without a credential, and hears of a catalog change.
func TestTypeScriptSDK(t *testing.T) {
	dir, node := testenv.Node22(t)
	h := newHarness(t, config{sampleOnly: true})
	cmd := nodeCmd(t, dir, node, filepath.Join(dir, "mcp-client.mjs"), h.url, h.key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var checks []string
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Event, Check, Detail string
			OK                   bool
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("output %q: %v", sc.Text(), err)
			continue
		}
		if line.Event == "listening" {
			err := h.reg.Register(catalog.API{ID: "ping", Title: "Ping", Description: "Answers pong.", Method: http.MethodGet, Cost: 1,
				Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{"pong": true}, nil })})
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		checks = append(checks, line.Check)
		if !line.OK {
			t.Errorf("check %s failed: %s", line.Check, line.Detail)
		} else {
			t.Logf("ok %s: %.200s", line.Check, line.Detail)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the client failed: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"no-credential-refused", "connect", "list-tools", "hash-described", "call-hash",
		"call-date-info", "bad-arguments-is-error", "unknown-tool-error", "list-changed"} {
		if !slices.Contains(checks, want) {
			t.Errorf("check %s did not run; stderr:\n%s", want, stderr.String())
		}
	}
}

// TestInspectorCLI drives the handler with the MCP Inspector's CLI mode
// (@modelcontextprotocol/inspector 2.12): it lists the tools with a key header (also in
// strict mode, which checks the schemas' portability), calls hash, and without a
// credential reports that OAuth is required, having found the challenge.
func TestInspectorCLI(t *testing.T) {
	dir, node := testenv.Node22(t)
	inspector := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	if _, err := os.Stat(inspector); err != nil {
		testenv.Unavailable(t, "the MCP Inspector is not installed: %v", err)
	}
	h := newHarness(t, config{sampleOnly: true})
	run := func(args ...string) []byte {
		t.Helper()
		cmd := nodeCmd(t, dir, node, append([]string{inspector, "--cli", h.url}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("inspector %q: %v\n%s\n%s", args, err, out, stderr.String())
		}
		return out
	}
	key := "x-api-key: " + h.key

	var list struct {
		Tools []struct{ Name, Description string }
	}
	if out := run("--method", "tools/list", "--header", key); json.Unmarshal(out, &list) != nil || len(list.Tools) != 6 {
		t.Fatalf("tools/list: %s; want the 6 sample tools", out)
	}
	for _, tool := range list.Tools {
		if !strings.Contains(tool.Description, "per call.") {
			t.Errorf("tool %s: description %q without the cost", tool.Name, tool.Description)
		}
	}
	run("--method", "tools/list", "--header", key, "--strict")

	var call struct {
		Result struct {
			IsError           bool
			StructuredContent map[string]string
		}
	}
	out := run("--method", "tools/call", "--tool-name", "hash", "--tool-args-json", `{"text":"hello"}`, "--header", key, "--format", "json")
	if err := json.Unmarshal(out, &call); err != nil || call.Result.IsError ||
		call.Result.StructuredContent["hash"] != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("tools/call hash: %s (%v)", out, err)
	}
	if h.balance(t, h.account) != 999 {
		t.Errorf("balance %d after one call, want 999", h.balance(t, h.account))
	}

	// Without a credential it meets the 401 and its challenge, and asks for OAuth.
	cmd := nodeCmd(t, dir, node, inspector, "--cli", h.url, "--method", "tools/list")
	out, err := cmd.CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("auth_required")) {
		t.Fatalf("without a credential: %v %s; want the auth_required failure", err, out)
	}
}

// notApplicable are the conformance server scenarios that do not apply to a catalog of
// APIs, with the reason: they call fixture tools, prompts and resources of the SDKs'
// "everything" test servers (test_simple_text, test_error_handling, ...), or features
// the service does not offer.
var notApplicable = map[string]string{
	"completion-complete":           "the server offers no completions (no prompts or resource templates)",
	"tools-call-simple-text":        "calls the fixture tool test_simple_text",
	"tools-call-image":              "calls the fixture tool test_image_content",
	"tools-call-audio":              "calls the fixture tool test_audio_content",
	"tools-call-embedded-resource":  "calls the fixture tool test_embedded_resource",
	"tools-call-mixed-content":      "calls the fixture tool test_multiple_content_types",
	"tools-call-with-logging":       "calls the fixture tool test_tool_with_logging",
	"tools-call-error":              "calls the fixture tool test_error_handling (tool errors are tested in this package)",
	"tools-call-with-progress":      "calls the fixture tool test_tool_with_progress",
	"tools-call-sampling":           "calls the fixture tool test_sampling; APIs do not sample",
	"tools-call-elicitation":        "calls the fixture tool test_elicitation; APIs do not elicit",
	"elicitation-sep1034-defaults":  "calls the fixture tool test_elicitation_sep1034_defaults",
	"elicitation-sep1330-enums":     "calls the fixture tool test_elicitation_sep1330_enums",
	"resources-read-text":           "the server offers no resources",
	"resources-read-binary":         "the server offers no resources",
	"resources-templates-read":      "the server offers no resources",
	"resources-subscribe":           "the server offers no resources",
	"resources-unsubscribe":         "the server offers no resources",
	"prompts-get-simple":            "the server offers no prompts",
	"prompts-get-with-args":         "the server offers no prompts",
	"prompts-get-embedded-resource": "the server offers no prompts",
	"prompts-get-with-image":        "the server offers no prompts",
}

// TestConformance runs the server scenarios of the MCP conformance suite
// (@modelcontextprotocol/conformance 0.1.16) against the handler. The suite cannot send
// headers, so it talks to a front that adds the key to every request. The scenarios
// that apply must pass: server-initialize, logging-set-level, ping, tools-list,
// server-sse-multiple-streams, resources-list, prompts-list (both empty) and
// dns-rebinding-protection; the others are listed, with why, in notApplicable, and
// passed to the suite as its baseline of expected failures, so that one of them
// passing (a stale entry) fails the test too.
func TestConformance(t *testing.T) {
	dir, node := testenv.Node22(t)
	suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(suite); err != nil {
		testenv.Unavailable(t, "the conformance suite is not installed: %v", err)
	}
	h := newHarness(t, config{sampleOnly: true})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-Api-Key", h.key)
		h.handler.ServeHTTP(w, r)
	}))
	defer front.Close()

	tmp := t.TempDir()
	var baseline strings.Builder
	baseline.WriteString("server:\n")
	for _, s := range sortedKeys(notApplicable) {
		baseline.WriteString("  - " + s + " # " + notApplicable[s] + "\n")
	}
	baselineFile := filepath.Join(tmp, "baseline.yml")
	if err := os.WriteFile(baselineFile, []byte(baseline.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(tmp, "results")
	cmd := nodeCmd(t, dir, node, suite, "server", "--url", front.URL+path, "--expected-failures", baselineFile, "-o", results)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the conformance suite failed: %v\n%s", err, out)
	}
	// Every applicable scenario ran, and each of its checks passed.
	runs, _ := filepath.Glob(filepath.Join(results, "server-*", "checks.json"))
	passed := map[string]bool{}
	for _, f := range runs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct{ ID, Name, Status, ErrorMessage string }
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		scenario := scenarioOf(filepath.Base(filepath.Dir(f)))
		if _, skip := notApplicable[scenario]; skip {
			continue
		}
		ok := len(checks) > 0
		for _, c := range checks {
			if c.Status != "SUCCESS" && c.Status != "INFO" {
				ok = false
				t.Errorf("%s: %s %s: %s", scenario, c.Name, c.Status, c.ErrorMessage)
			}
		}
		passed[scenario] = ok
	}
	for _, s := range []string{"server-initialize", "logging-set-level", "ping", "tools-list", "server-sse-multiple-streams",
		"resources-list", "prompts-list", "dns-rebinding-protection"} {
		if !passed[s] {
			t.Errorf("scenario %s did not pass\n%s", s, out)
		}
	}
}

// scenarioOf returns the scenario of a results directory, server-<scenario>-<time>.
func scenarioOf(dir string) string {
	s := strings.TrimPrefix(dir, "server-")
	if i := strings.Index(s, "-20"); i >= 0 { // the timestamp, 2026-...
		s = s[:i]
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
