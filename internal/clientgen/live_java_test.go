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

// jdk is a Java toolchain with Debian's Jackson jars, which the Java packages need.
type jdk struct {
	javac, java string
	classpath   string // the Jackson jars
}

// findJDK returns the JDK and the Jackson jars (Debian's libjackson2-databind-java),
// or skips the test (fails it in CI) without them.
func findJDK(t *testing.T) jdk {
	t.Helper()
	var jars []string
	for _, name := range []string{"jackson-databind", "jackson-core", "jackson-annotations"} {
		jars = append(jars, testenv.File(t, "/usr/share/java/"+name+".jar", "libjackson2-databind-java"))
	}
	return jdk{testenv.Program(t, "javac"), testenv.Program(t, "java"), strings.Join(jars, string(os.PathListSeparator))}
}

// compile compiles Java sources into dir at the packages' source level, Java 8, with
// every warning an error.
func (j jdk) compile(t *testing.T, dir, classpath string, sources []string) {
	t.Helper()
	args := append([]string{"--release", "8", "-Xlint:all", "-Werror", "-encoding", "UTF-8", "-cp", classpath, "-d", dir}, sources...)
	if out, err := exec.CommandContext(t.Context(), j.javac, args...).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
}

// sourceFiles returns the files under dir whose names end in ext.
func sourceFiles(t *testing.T, dir, ext string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ext) {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s files in %s: %v", ext, dir, err)
	}
	return files
}

func javaClass(pkg string) func(api string) string {
	return func(api string) string { return pkg + "." + javaPackageSegment(api) + "." + pascal(api) + "Client" }
}

// TestJavaPackages compiles the generated Java packages of the sample catalog with
// javac --release 8 against Debian's Jackson jars, and with java runs every live case
// and the constructor's checks against a live server, then each README's example as
// written.
func TestJavaPackages(t *testing.T) {
	toolchain(t, "Java")
	j := findJDK(t)
	srv := testserver.Start(t)
	img := srv.ImageFile(t)
	classes := t.TempDir()
	j.compile(t, classes, j.classpath, append(sourceFiles(t, filepath.Join(examplesDir, "java"), ".java"), "testdata/Drive.java"))
	cases := typedCases(srv, img, javaClass("dev.tollgate.clients"), func(m string) string { return m })
	cp := classes + string(os.PathListSeparator) + j.classpath
	report := runDriver(t, exec.CommandContext(t.Context(), j.java, "-cp", cp, "Drive"), cases)
	checkTypedReport(t, report, "ValidationException", "ApiException", "IllegalArgumentException")
	checkNetwork(t, srv, liveCases, 0, "java-package")
	bcases := batchCases(srv)
	before, balance := srv.APICalls(), srv.Balance(t, "acme")
	report = runDriver(t, exec.CommandContext(t.Context(), j.java, "-cp", cp, "Drive"), typedBatchCases(srv, bcases, javaClass("dev.tollgate.clients"), "executeBatchMaps"))
	checkBatchReport(t, srv, bcases, report, "ValidationException", "ApiException", balance)
	checkNetwork(t, srv, bcases, before, "java-package")

	// Each README's example, compiled and run as written, against packages that call
	// the test server by default.
	pkgs := generateExamples(t, "java", srv.URL)
	compiled := t.TempDir()
	j.compile(t, compiled, j.classpath, sourceFiles(t, pkgs, ".java"))
	for id := range packageDirs(t, "java") {
		t.Run("README "+id, func(t *testing.T) {
			work := readmeWork(t, srv, filepath.Join(pkgs, id, "README.md"), "java", "Example.java")
			cp := strings.Join([]string{work, compiled, j.classpath}, string(os.PathListSeparator))
			j.compile(t, work, cp, []string{filepath.Join(work, "Example.java")})
			cmd := exec.CommandContext(t.Context(), j.java, "-cp", cp, "Example")
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "TOLLGATE_API_KEY="+testserver.PrimaryKey)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "credits left:") {
				t.Errorf("the README example of %s: %v\n%s", id, err, out)
			}
		})
	}
}
