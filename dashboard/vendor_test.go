package dashboard_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestVendoredAssets: the committed bundles of dashboard/assets/vendor are what
// tools/dashboard-assets/build.mjs makes from the pinned npm packages: the script,
// run into a temporary folder, writes the same files, byte for byte, and no other.
//
// It needs Node ($TOLLGATE_NODE_TOOLS) and the packages of tools/dashboard-assets
// (npm ci there; scripts/test.sh does it); without them it skips, and under CI=true
// fails.
func TestVendoredAssets(t *testing.T) {
	_, node := testenv.Node22(t)
	tools := filepath.Join("..", "tools", "dashboard-assets")
	if _, err := os.Stat(filepath.Join(tools, "node_modules", "esbuild", "package.json")); err != nil {
		testenv.Unavailable(t, "the npm packages of tools/dashboard-assets are not installed (run npm ci there; scripts/test.sh does): %v", err)
	}
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), node, "build.mjs", out)
	cmd.Dir = tools
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.mjs: %v\n%s", err, output)
	}
	built, committed := files(t, out), files(t, filepath.Join("assets", "vendor"))
	for _, name := range built {
		if !slices.Contains(committed, name) {
			t.Errorf("the script makes %s, which is not committed", name)
		}
	}
	for _, name := range committed {
		if !slices.Contains(built, name) {
			t.Errorf("%s is committed, but the script does not make it", name)
			continue
		}
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("assets", "vendor", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("the committed %s (%d bytes) differs from what the script makes (%d bytes): run node tools/dashboard-assets/build.mjs and commit", name, len(got), len(want))
		}
	}
	if len(committed) < 4 {
		t.Errorf("only %d vendored files: %v", len(committed), committed)
	}
}

// files lists the files under dir, by their paths relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
