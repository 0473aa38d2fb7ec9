package clientgen

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

func TestNames(t *testing.T) {
	tests := []struct {
		in                 string
		goName, pascalName string
	}{
		{"text", "Text", "Text"},
		{"delay_ms", "DelayMs", "DelayMs"},
		{"day-of-week", "DayOfWeek", "DayOfWeek"},
		{"is leap year", "IsLeapYear", "IsLeapYear"},
		{"1st-of-month", "X1stOfMonth", "X1stOfMonth"},
		{"user_id", "UserID", "UserId"},
		{"imageURL", "ImageURL", "ImageUrl"},
		{"uuid-generator", "UUIDGenerator", "UuidGenerator"},
		{"iso:week", "IsoWeek", "IsoWeek"},
	}
	for _, tt := range tests {
		if got := goName(tt.in); got != tt.goName {
			t.Errorf("goName(%q) = %q, want %q", tt.in, got, tt.goName)
		}
		if got := pascal(tt.in); got != tt.pascalName {
			t.Errorf("pascal(%q) = %q, want %q", tt.in, got, tt.pascalName)
		}
	}
	for in, want := range map[string]string{"uuid-generator": "uuidgenerator", "go": "goapi", "3d": "api3d", "hash": "hash"} {
		if got := goPackageName(in); got != want {
			t.Errorf("goPackageName(%q) = %q, want %q", in, got, want)
		}
	}
	s := newNameSet("Values")
	if a, b, c := s.add("Values"), s.add("X"), s.add("X"); a != "Values2" || b != "X" || c != "X2" {
		t.Errorf("nameSet gave %s %s %s", a, b, c)
	}
}

// compiled compiles a definition for the version tests, failing the test if it is
// wrong.
func compiled(t *testing.T, def catalog.API) *catalog.API {
	t.Helper()
	a, err := catalog.Compile(def)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestVersions checks the semver rules: the same definition keeps the version,
// documentation and cost are a patch, added optional parameters or result fields a
// minor version, and any change to an existing shape a major version.
func TestVersions(t *testing.T) {
	base := apis.Hash()
	base.Handler = nil
	change := func(f func(a *catalog.API)) catalog.API {
		a := base
		a.Params = append([]catalog.Param(nil), base.Params...)
		a.Result = append([]catalog.Field(nil), base.Result...)
		f(&a)
		return a
	}
	tests := []struct {
		name string
		new  catalog.API
		want string
	}{
		{"unchanged", base, "1.4.2"},
		{"description", change(func(a *catalog.API) { a.Description = "Hashes." }), "1.4.3"},
		{"parameter description", change(func(a *catalog.API) { a.Params[0].Description = "What to hash." }), "1.4.3"},
		{"cost", change(func(a *catalog.API) { a.Cost = 2 }), "1.4.3"},
		{"optional parameter", change(func(a *catalog.API) {
			a.Params = append(a.Params, catalog.Param{Name: "salt", Type: catalog.String})
		}), "1.5.0"},
		{"result field", change(func(a *catalog.API) {
			a.Result = append(a.Result, catalog.Field{Name: "bits", Type: catalog.Integer})
		}), "1.5.0"},
		{"required parameter", change(func(a *catalog.API) {
			a.Params = append(a.Params, catalog.Param{Name: "salt", Type: catalog.String, Required: true})
		}), "2.0.0"},
		{"removed parameter", change(func(a *catalog.API) { a.Params = a.Params[:1] }), "2.0.0"},
		{"tighter rule", change(func(a *catalog.API) { a.Params[0].MaxLength = catalog.Len(100) }), "2.0.0"},
		{"enum value removed", change(func(a *catalog.API) { a.Params[1].Enum = []any{"sha256", "sha512"} }), "2.0.0"},
		{"removed result field", change(func(a *catalog.API) { a.Result = a.Result[1:] }), "2.0.0"},
		{"result type", change(func(a *catalog.API) { a.Result[1].Type = catalog.JSON }), "2.0.0"},
		{"method", change(func(a *catalog.API) { a.Method = http.MethodPost }), "2.0.0"},
	}
	prev := &meta{Version: "1.4.2", API: compiled(t, base)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nextVersion(prev, compiled(t, tt.new))
			if err != nil || got != tt.want {
				t.Errorf("nextVersion = %q, %v; want %s", got, err, tt.want)
			}
		})
	}
	if v, err := nextVersion(nil, prev.API); v != firstVersion || err != nil {
		t.Errorf("a new package: %q, %v", v, err)
	}
	for _, bad := range []string{"1.0", "v1.0.0", "1.02.0", "1.x.0"} {
		if _, err := parseSemver(bad); err == nil {
			t.Errorf("parseSemver(%q) accepted it", bad)
		}
	}
}

// writeCatalog writes a catalog file holding defs, as GET /v1/catalog serves them.
func writeCatalog(t *testing.T, path string, defs ...catalog.API) {
	t.Helper()
	list := make([]*catalog.API, len(defs))
	for i, d := range defs {
		d.Handler = nil
		list[i] = compiled(t, d)
	}
	b, err := json.Marshal(map[string]any{"status": "ok", "error": nil, "data": map[string]any{"apis": list}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRegenerate runs the command twice over the same directory: the second run, on a
// catalog where one API gained an optional parameter and another disappeared, bumps
// that API's version in every language's metadata, keeps the others' and their files'
// bytes, and leaves the packages of the removed API alone (they may still be in use).
func TestRegenerate(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "clients")
	cat := filepath.Join(dir, "catalog.json")
	gen := func() {
		t.Helper()
		var stderr bytes.Buffer
		if code := Run(t.Context(), []string{"-catalog", cat, "-out", out}, io.Discard, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	}
	writeCatalog(t, cat, apis.Hash(), apis.Echo(), apis.UUIDGenerator())
	gen()
	before := readTree(t, out)
	echo := apis.Echo()
	echo.Params = append(echo.Params, catalog.Param{Name: "repeat", Type: catalog.Integer, Min: catalog.Num(1)})
	writeCatalog(t, cat, apis.Hash(), echo)
	gen()
	after := readTree(t, out)
	for _, p := range []string{"go/hash/client.go", "js/hash/index.js", "python/hash/tollgate_hash/client.py", "dotnet/hash/HashClient.cs",
		"java/hash/src/main/java/dev/tollgate/clients/hash/HashClient.java", "php/hash/src/HashClient.php", "dart/hash/lib/src/client.dart"} {
		if !bytes.Equal(before[p], after[p]) {
			t.Errorf("%s changed although the hash API did not", p)
		}
	}
	for p, want := range map[string]string{
		"go/echo/doc.go":                        `const Version = "1.1.0"`,
		"js/echo/package.json":                  `"version": "1.1.0"`,
		"python/echo/pyproject.toml":            `version = "1.1.0"`,
		"python/echo/tollgate_echo/__init__.py": `__version__ = "1.1.0"`,
		"go/echo/api.json":                      `"version": "1.1.0"`,
		"go/hash/doc.go":                        `const Version = "1.0.0"`,
		"go/uuidgenerator/doc.go":               `const Version = "1.0.0"`,
		"python/echo/tollgate_echo/client.py":   `"name": "repeat"`,
		"js/echo/index.d.ts":                    "repeat?: number;",
		"go/echo/client.go":                     "Repeat *int64",
		"python/hash/tollgate_hash/__init__.py": `__version__ = "1.0.0"`,
		"js/uuid-generator/package.json":        `"version": "1.0.0"`,
		"python/uuid-generator/pyproject.toml":  `version = "1.0.0"`,
		"js/hash/package.json":                  `"version": "1.0.0"`,
		"python/echo/README.md":                 "Version 1.1.0.",
		"js/echo/README.md":                     "Version 1.1.0.",
		"go/echo/README.md":                     "Version 1.1.0.",
		"go/echo/example_test.go":               "echo.Params{Message: \"hello\"}",
		"python/uuid-generator/README.md":       "client.execute({})",
		"js/uuid-generator/README.md":           "client.execute({})",
		"go/uuidgenerator/example_test.go":      "uuidgenerator.Params{}",
		"js/echo/index.js":                      "export const VERSION = '1.1.0';",
		"python/echo/tollgate_echo/py.typed":    "",
		"go/hash/README.md":                     "go get example.com/tollgate/clients/hash",
		"js/hash/README.md":                     "npm install ./path/to/js/hash",
		"python/hash/README.md":                 "pip install ./path/to/python/hash",
		"dotnet/hash/README.md":                 "dotnet add reference ./path/to/dotnet/hash/Tollgate.Hash.csproj",
		"java/hash/README.md":                   "mvn -f ./path/to/java/hash/pom.xml install",
		"php/hash/README.md":                    "composer config repositories.hash path ./path/to/php/hash",
		"dart/hash/README.md":                   `dart pub add 'tollgate_hash:{"path":"./path/to/dart/hash"}'`,
		"python/hash/tollgate_hash/client.py":   `DEFAULT_BASE_URL = "http://localhost:8080"`,
		"js/hash/index.js":                      "export const DEFAULT_BASE_URL = 'http://localhost:8080';",
		"dotnet/echo/Tollgate.Echo.csproj":      "<Version>1.1.0</Version>",
		"dotnet/hash/Tollgate.Hash.csproj":      "<Version>1.0.0</Version>",
		"dotnet/echo/EchoClient.cs":             `public const string PackageVersion = @"1.1.0";`,
		"dotnet/echo/Runtime.cs":                `{""name"":""repeat"",""type"":""integer"",""min"":1}`,
		"java/echo/pom.xml":                     "<version>1.1.0</version>",
		"java/hash/pom.xml":                     "<version>1.0.0</version>",
		"java/echo/src/main/java/dev/tollgate/clients/echo/EchoParams.java": "public EchoParams repeat(Long value)",
		"php/echo/composer.json":        `"version": "1.1.0"`,
		"php/hash/composer.json":        `"version": "1.0.0"`,
		"php/echo/src/EchoClient.php":   "public const VERSION = '1.1.0';",
		"dart/echo/pubspec.yaml":        "version: 1.1.0",
		"dart/hash/pubspec.yaml":        "version: 1.0.0",
		"dart/echo/lib/src/client.dart": "final int? repeat;",
		"dart/echo/README.md":           "Version 1.1.0.",
	} {
		got, ok := after[p]
		if !ok || !strings.Contains(string(got), want) {
			t.Errorf("%s does not hold %q:\n%s", p, want, got)
		}
	}
}

// TestDeterministic generates the sample catalog twice and compares the bytes.
func TestDeterministic(t *testing.T) {
	list := syntheticCatalog(t, 8)
	o := synthOptions
	a, err := generate(list, languages, o, noPrevious)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b, err := generate(list, languages, o, noPrevious)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != len(b) {
			t.Fatalf("%d files, then %d", len(a), len(b))
		}
		for i := range a {
			if a[i].path != b[i].path || !bytes.Equal(a[i].data, b[i].data) {
				t.Fatalf("%s differs between two runs", a[i].path)
			}
		}
	}
}

// TestBrandNames checks that the default brand's command gives the default names, and
// that another gives names of its own that the flags accept.
func TestBrandNames(t *testing.T) {
	def := Names{GoImport: DefaultGoImport, NPMScope: DefaultNPMScope, PythonPrefix: DefaultPythonPrefix, DotnetNamespace: DefaultDotnetNamespace,
		JavaPackage: DefaultJavaPackage, PHPNamespace: DefaultPHPNamespace, DartPrefix: DefaultDartPrefix, BrandCommand: "tollgate"}
	if got := BrandNames("tollgate"); got != def {
		t.Errorf("BrandNames(tollgate) = %+v, want %+v", got, def)
	}
	want := Names{GoImport: "example.com/acme-2-cloud/clients", NPMScope: "@acme-2-cloud", PythonPrefix: "acme-2-cloud", DotnetNamespace: "Acme2Cloud",
		JavaPackage: "dev.acme2cloud.clients", PHPNamespace: "Acme2Cloud", DartPrefix: "acme_2_cloud", BrandCommand: "acme-2-cloud"}
	if got := BrandNames("acme-2-cloud"); got != want {
		t.Errorf("BrandNames(acme-2-cloud) = %+v, want %+v", got, want)
	}
	for _, command := range []string{"acme-2-cloud", "int", "new-1"} {
		if err := BrandNames(command).Check(); err != nil {
			t.Errorf("the names of %s: %v", command, err)
		}
	}
	if got := BrandNames("int").JavaPackage; got != "dev.intapi.clients" {
		t.Errorf("the Java package of the command int is %s, a keyword", got)
	}
}

// TestUsage checks the command line: mistakes exit with 2 and say what to fix, an
// unreadable catalog exits with 1, and a catalog URL is read from the service.
func TestUsage(t *testing.T) {
	srv := testserver.Start(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"apis": [{"id": "Bad"}]}`), 0o644)
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no flags", nil, 2, "-catalog and -out are required"},
		{"unknown language", []string{"-catalog", "c.json", "-out", dir, "-lang", "go,rust"}, 2, `"rust" is not one of go, js, python`},
		{"npm scope", []string{"-catalog", "c.json", "-out", dir, "-npm-scope", "tollgate"}, 2, "must look like @scope"},
		{"base URL", []string{"-catalog", "c.json", "-out", dir, "-base-url", "localhost"}, 2, "http or https"},
		{"brand command with a space", []string{"-catalog", "c.json", "-out", dir, "-brand-command", "acme cli"}, 2, `-brand-command: the Command "acme cli" is not allowed: it must be 1 to 32 characters, lowercase letters`},
		{"brand command with a quote", []string{"-catalog", "c.json", "-out", dir, "-brand-command", "acme'"}, 2, "-brand-command: the Command"},
		{"brand command naming another class", []string{"-catalog", "c.json", "-out", dir, "-brand-command", "validation"}, 2, `-brand-command "validation" would name the packages' base error class ValidationError`},
		{"brand command naming a built-in class", []string{"-catalog", "c.json", "-out", dir, "-brand-command", "runtime"}, 2, "base error class RuntimeException"},
		{"lowercase brand prefix", []string{"-catalog", "c.json", "-out", dir, "-brand-env", "acme"}, 2, `-brand-env: the EnvPrefix "acme" is not allowed: it must be 1 to 32 characters, uppercase letters`},
		{"brand prefix with a $", []string{"-catalog", "c.json", "-out", dir, "-brand-env", "A$B"}, 2, "-brand-env: the EnvPrefix"},
		{"stray argument", []string{"-catalog", "c.json", "-out", dir, "now"}, 2, "unexpected arguments"},
		{"missing catalog", []string{"-catalog", filepath.Join(dir, "none.json"), "-out", dir}, 1, "no such file"},
		{"invalid catalog", []string{"-catalog", bad, "-out", dir}, 1, "invalid API definition"},
		{"no service", []string{"-catalog", "http://127.0.0.1:1/v1/catalog", "-out", dir}, 1, "reading the catalog"},
		{"help", []string{"-h"}, 0, "-python-prefix"},
		{"help names the brand's flags", []string{"-h"}, 0, "-brand-env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Run(t.Context(), tt.args, &stdout, &stderr); code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.stderr)
			}
		})
	}
	t.Run("brand", func(t *testing.T) {
		out := filepath.Join(dir, "brand")
		var stdout, stderr bytes.Buffer
		args := []string{"-catalog", "../../examples/clients/catalog.json", "-out", out, "-lang", "js,python,php",
			"-brand-command", "acme", "-brand-env", "ACME", "-npm-scope", "@shop"}
		if code := Run(t.Context(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		for file, want := range map[string]string{
			"js/hash/package.json":                 `"name": "@shop/hash"`, // the flag's name
			"js/hash/README.md":                    "process.env.ACME_API_KEY",
			"python/hash/pyproject.toml":           `name = "acme-hash"`, // the brand's
			"python/hash/README.md":                `os.environ["ACME_API_KEY"]`,
			"php/hash/src/AcmeException.php":       `namespace Acme\Hash;`,
			"php/hash/src/ValidationException.php": "extends AcmeException",
		} {
			if b, err := os.ReadFile(filepath.Join(out, file)); err != nil || !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %s (%v)", file, want, err)
			}
		}
	})
	t.Run("from the service", func(t *testing.T) {
		out := filepath.Join(dir, "live")
		var stdout, stderr bytes.Buffer
		if code := Run(t.Context(), []string{"-catalog", srv.URL + "/v1/catalog", "-out", out, "-lang", "js"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		b, err := os.ReadFile(filepath.Join(out, "js", "hash", "index.js"))
		if err != nil || !strings.Contains(string(b), "DEFAULT_BASE_URL = '"+srv.URL+"'") {
			t.Errorf("the base URL is not the catalog's service: %v", err)
		}
		if _, err := os.Stat(filepath.Join(out, "go")); !os.IsNotExist(err) {
			t.Errorf("-lang js wrote Go packages (%v)", err)
		}
		if !strings.Contains(stdout.String(), "6 APIs") {
			t.Errorf("stdout %q", stdout.String())
		}
	})
}
