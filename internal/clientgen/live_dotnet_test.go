package clientgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// mono is Mono's C# compiler and runtime, with the assemblies the .NET packages need:
// Newtonsoft.Json (Debian's libnewtonsoft-json-cil-dev) and System.Net.Http
// (libmono-system-net-http4.0-cil).
type mono struct {
	mcs, mono  string
	newtonsoft string
}

// newtonsoftDLL is where Debian installs Newtonsoft.Json in Mono's global assembly cache.
const newtonsoftDLL = "/usr/lib/mono/gac/Newtonsoft.Json/6.0.0.0__b9a188c8922137c6/Newtonsoft.Json.dll"

// findMono returns Mono, or skips the test (fails it in CI) without it.
func findMono(t *testing.T) mono {
	t.Helper()
	testenv.File(t, "/usr/lib/mono/4.5/System.Net.Http.dll", "libmono-system-net-http4.0-cil")
	return mono{testenv.Program(t, "mcs"), testenv.Program(t, "mono"), testenv.File(t, newtonsoftDLL, "libnewtonsoft-json-cil-dev")}
}

// compile compiles C# sources into out (a library for a .dll, a program for an
// .exe), with every warning an error; a library's XML documentation is checked too.
func (m mono) compile(t *testing.T, out string, refs, sources []string) {
	t.Helper()
	args := []string{"-target:library", "-doc:" + out + ".xml"}
	if strings.HasSuffix(out, ".exe") {
		args = []string{"-target:exe"}
	}
	args = append(args, "-warnaserror", "-langversion:7", "-out:"+out, "-r:"+m.newtonsoft, "-r:System.Net.Http.dll", "-r:System.Numerics.dll")
	for _, r := range refs {
		args = append(args, "-r:"+r)
	}
	if b, err := exec.CommandContext(t.Context(), m.mcs, append(args, sources...)...).CombinedOutput(); err != nil {
		t.Fatalf("mcs: %v\n%s", err, b)
	}
}

// compilePackages compiles each .NET package under dir into its own assembly in out.
func (m mono) compilePackages(t *testing.T, dir, out string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		sources, _ := filepath.Glob(filepath.Join(dir, e.Name(), "*.cs"))
		m.compile(t, filepath.Join(out, e.Name()+".dll"), nil, sources)
	}
}

// driver compiles testdata/Drive.cs next to the packages' assemblies in out, which it
// loads, and returns the command that runs it.
func (m mono) driver(t *testing.T, out string) *exec.Cmd {
	t.Helper()
	exe := filepath.Join(out, "drive.exe")
	m.compile(t, exe, nil, []string{"testdata/Drive.cs"})
	return exec.CommandContext(t.Context(), m.mono, exe)
}

func dotnetClass(namespace string) func(api string) string {
	return func(api string) string { return namespace + "." + pascal(api) + "." + pascal(api) + "Client" }
}

// dotnetMethod is the C# name of a method: ExecuteAsync.
func dotnetMethod(m string) string { return strings.ToUpper(m[:1]) + m[1:] + "Async" }

// TestDotnetPackages compiles each generated .NET package of the sample catalog with
// Mono's mcs (C# 7, every warning an error) against Debian's Newtonsoft.Json, and with
// mono runs every live case and the constructor's checks against a live server, then
// each README's example as written.
func TestDotnetPackages(t *testing.T) {
	toolchain(t, ".NET")
	m := findMono(t)
	srv := testserver.Start(t)
	img := srv.ImageFile(t)
	out := t.TempDir()
	m.compilePackages(t, filepath.Join(examplesDir, "dotnet"), out)
	cases := typedCases(srv, img, dotnetClass("Tollgate"), dotnetMethod)
	report := runDriver(t, m.driver(t, out), cases)
	checkTypedReport(t, report, "ValidationException", "ApiException", "ArgumentException")
	checkNetwork(t, srv, liveCases, 0, "dotnet-package")
	bcases := batchCases(srv)
	before, balance := srv.APICalls(), srv.Balance(t, "acme")
	report = runDriver(t, exec.CommandContext(t.Context(), m.mono, filepath.Join(out, "drive.exe")), typedBatchCases(srv, bcases, dotnetClass("Tollgate"), "ExecuteBatchAsync"))
	checkBatchReport(t, srv, bcases, report, "ValidationException", "ApiException", balance)
	checkNetwork(t, srv, bcases, before, "dotnet-package")

	// Each README's example, compiled and run as written, against packages that call
	// the test server by default.
	pkgs := generateExamples(t, "dotnet", srv.URL)
	for id := range packageDirs(t, "dotnet") {
		t.Run("README "+id, func(t *testing.T) {
			work := readmeWork(t, srv, filepath.Join(pkgs, id, "README.md"), "csharp", "Example.cs")
			sources, _ := filepath.Glob(filepath.Join(pkgs, id, "*.cs"))
			dll := filepath.Join(work, id+".dll")
			m.compile(t, dll, nil, sources)
			exe := filepath.Join(work, "example.exe")
			m.compile(t, exe, []string{dll}, []string{filepath.Join(work, "Example.cs")})
			cmd := exec.CommandContext(t.Context(), m.mono, exe)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "TOLLGATE_API_KEY="+testserver.PrimaryKey)
			b, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(b), "credits left:") {
				t.Errorf("the README example of %s: %v\n%s", id, err, b)
			}
		})
	}
}
