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

// TestREADMEInstallJavaScript runs each JavaScript package's install step as its README
// writes it, with the path of the package's folder, in a new project: npm links the
// package in under its npm name, and importing that name finds the client. Nothing
// reaches a registry (the packages have no dependencies, and npm runs offline).
func TestREADMEInstallJavaScript(t *testing.T) {
	toolchain(t, "JavaScript")
	node := testenv.Program(t, "node")
	testenv.Program(t, "npm")
	for id, dir := range packageDirs(t, "js") {
		t.Run(id, func(t *testing.T) {
			project := t.TempDir()
			if err := os.WriteFile(filepath.Join(project, "package.json"), []byte(`{"name":"app","private":true,"type":"module"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			runInstall(t, project, dir, "js", id, "npm_config_offline=true", "npm_config_audit=false", "npm_config_fund=false",
				"npm_config_update_notifier=false")
			importer := "import { " + pascal(id) + "Client } from '@tollgate/" + id + "'; console.log(typeof " + pascal(id) + "Client);"
			cmd := exec.CommandContext(t.Context(), node, "--input-type=module", "-e", importer)
			cmd.Dir = project
			if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "function" {
				t.Errorf("importing @tollgate/%s after the README's install: %v\n%s", id, err, out)
			}
		})
	}
}

// TestREADMEInstallPHP installs each PHP package as its README says, with Composer
// through a path repository, in a new project, and runs the README's example as
// written, with Composer's own autoloader, against a test server. The one step the
// README does not have switches Packagist off, so that nothing leaves the machine.
func TestREADMEInstallPHP(t *testing.T) {
	toolchain(t, "PHP")
	php := findPHP(t)
	testenv.Program(t, "composer")
	srv := testserver.Start(t)
	pkgs := generateExamples(t, "php", srv.URL)
	for id := range packageDirs(t, "php") {
		t.Run(id, func(t *testing.T) {
			dir := filepath.Join(pkgs, id)
			project := readmeWork(t, srv, filepath.Join(dir, "README.md"), "php", "example.php")
			composer := []string{"COMPOSER_HOME=" + t.TempDir(), "COMPOSER_ALLOW_SUPERUSER=1", "COMPOSER_NO_INTERACTION=1",
				"COMPOSER_DISABLE_NETWORK=1"}
			if err := os.WriteFile(filepath.Join(project, "composer.json"), []byte(`{"repositories":{"packagist.org":false}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			runInstall(t, project, dir, "php", id, composer...)
			runPHPExample(t, php, project, id)
		})
	}
}

// runInstall runs, in project, the install step of the package in dir (lang/id): the
// first sh block of its README, with the README's placeholder path replaced by dir, in
// bash -e with env added to the environment.
func runInstall(t *testing.T, project, dir, lang, id string, env ...string) {
	t.Helper()
	bash := testenv.Program(t, "bash")
	block := readmeBlock(t, filepath.Join(dir, "README.md"), "sh")
	placeholder := "./path/to/" + lang + "/" + id
	if !strings.Contains(block, placeholder) {
		t.Fatalf("the README's install step does not name %s:\n%s", placeholder, block)
	}
	cmd := exec.CommandContext(t.Context(), bash, "-e", "-c", strings.ReplaceAll(block, placeholder, dir))
	cmd.Dir = project
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's install step:\n%s\n%v\n%s", block, err, out)
	}
}
