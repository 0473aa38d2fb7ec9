package clientgen

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// findPHP returns the php command, with the curl extension the packages need (Debian's
// php-cli and php-curl), or skips the test (fails it in CI) without them.
func findPHP(t *testing.T) string {
	t.Helper()
	php := testenv.Program(t, "php")
	if out, err := exec.CommandContext(t.Context(), php, "-r", "echo extension_loaded('curl') ? 'yes' : 'no';").Output(); err != nil || string(out) != "yes" {
		testenv.Unavailable(t, "php has no curl extension (Debian's php-curl): %v %s", err, out)
	}
	return php
}

// phpLint checks that every PHP file under dir parses.
func phpLint(t *testing.T, php, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(p, ".php") {
			return err
		}
		if out, err := exec.CommandContext(t.Context(), php, "-l", p).CombinedOutput(); err != nil {
			t.Errorf("php -l %s: %v\n%s", p, err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// phpDriver returns the command that runs testdata/drive.php over the packages in dirs.
func phpDriver(t *testing.T, php string, dirs []string) *exec.Cmd {
	t.Helper()
	return exec.CommandContext(t.Context(), php, append([]string{"-d", "error_reporting=-1", "-d", "display_errors=stderr", "testdata/drive.php"}, dirs...)...)
}

func phpClass(namespace string) func(api string) string {
	return func(api string) string { return namespace + `\` + pascal(api) + `\` + pascal(api) + "Client" }
}

// TestPHPPackages lints the generated PHP packages of the sample catalog, loads them as
// Composer would (PSR-4) and runs every live case and the constructor's checks against
// a live server with Debian's php-cli and php-curl, then each README's example as
// written.
func TestPHPPackages(t *testing.T) {
	toolchain(t, "PHP")
	php := findPHP(t)
	srv := testserver.Start(t)
	img := srv.ImageFile(t)
	phpLint(t, php, filepath.Join(examplesDir, "php"))
	var dirs []string
	for _, dir := range packageDirs(t, "php") {
		dirs = append(dirs, dir)
	}
	cases := typedCases(srv, img, phpClass("Tollgate"), func(m string) string { return m })
	report := runDriver(t, phpDriver(t, php, dirs), cases)
	checkTypedReport(t, report, "ValidationException", "ApiException", "InvalidArgumentException")
	checkNetwork(t, srv, liveCases, 0, "php-package")
	bcases := batchCases(srv)
	before, balance := srv.APICalls(), srv.Balance(t, "acme")
	report = runDriver(t, phpDriver(t, php, dirs), typedBatchCases(srv, bcases, phpClass("Tollgate"), "executeBatch"))
	checkBatchReport(t, srv, bcases, report, "ValidationException", "ApiException", balance)
	checkNetwork(t, srv, bcases, before, "php-package")

	// Each README's example, run as written, with a vendor/autoload.php that loads the
	// package (generated to call the test server) as Composer's would.
	pkgs := generateExamples(t, "php", srv.URL)
	for id := range packageDirs(t, "php") {
		t.Run("README "+id, func(t *testing.T) {
			work := readmeWork(t, srv, filepath.Join(pkgs, id, "README.md"), "php", "example.php")
			autoload := fmt.Sprintf("<?php\nrequire %q;\nregister_package(%q);\n", mustAbs(t, "testdata/psr4.php"), filepath.Join(pkgs, id))
			if err := os.MkdirAll(filepath.Join(work, "vendor"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, "vendor", "autoload.php"), []byte(autoload), 0o600); err != nil {
				t.Fatal(err)
			}
			runPHPExample(t, php, work, id)
		})
	}
}

// runPHPExample runs example.php in work with the test server's key, and requires it to
// print the credits left and no warning.
func runPHPExample(t *testing.T, php, work, id string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), php, "-d", "error_reporting=-1", "example.php")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "TOLLGATE_API_KEY="+testserver.PrimaryKey)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "credits left:") || strings.Contains(string(out), "Warning") {
		t.Errorf("the README example of %s: %v\n%s", id, err, out)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
