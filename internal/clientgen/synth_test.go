package clientgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// syntheticCatalog returns n compiled APIs that together use every feature the
// generator must handle: every type and rule, arrays of scalars and of objects,
// objects, names that are not identifiers in some language (day-of-week, 1st, class,
// is leap year), GET and POST, and file APIs.
func syntheticCatalog(tb testing.TB, n int) []*catalog.API {
	tb.Helper()
	apis := make([]*catalog.API, n)
	for i := range apis {
		def := catalog.API{
			ID:          fmt.Sprintf("synthetic-%03d", i),
			Title:       fmt.Sprintf("Synthetic %d", i),
			Description: "A synthetic API whose description has \"quotes\", a backslash \\ and */ comment ends.",
			Category:    "Synthetic",
			Method:      http.MethodGet,
			Cost:        int64(1 + i%3),
			Params: []catalog.Param{
				{Name: "text", Type: catalog.String, Required: true, MinLength: catalog.Len(1), MaxLength: catalog.Len(200), Description: "The text."},
				{Name: "mode", Type: catalog.String, Enum: []any{"fast", "it's", "x\"y"}, Default: "fast", Description: "The mode."},
				{Name: "count", Type: catalog.Integer, Min: catalog.Num(0), Max: catalog.Num(10), Default: 3},
				{Name: "ratio", Type: catalog.Number, Min: catalog.Num(-1.5), Max: catalog.Num(1.5), Enum: []any{0.5, 1, -1.5}},
				{Name: "flag", Type: catalog.Boolean, Description: "A switch."},
				{Name: "day-of-week", Type: catalog.String, Format: catalog.FormatDate},
				{Name: "class", Type: catalog.String, Format: catalog.FormatEmail, Example: "a@example.com"},
				{Name: "ip", Type: catalog.String, Format: catalog.FormatIP},
				{Name: "color", Type: catalog.String, Format: catalog.FormatHexColor},
				{Name: "tags", Type: catalog.Array, Items: &catalog.Param{Type: catalog.String, MaxLength: catalog.Len(20)}, MaxLength: catalog.Len(5)},
				{Name: "point", Type: catalog.Object, Fields: []catalog.Param{
					{Name: "x", Type: catalog.Number, Required: true},
					{Name: "label", Type: catalog.String},
				}},
				{Name: "items", Type: catalog.Array, Items: &catalog.Param{Type: catalog.Object, Fields: []catalog.Param{
					{Name: "id", Type: catalog.Integer, Required: true},
				}}},
				{Name: "site", Type: catalog.String, Format: catalog.FormatURL},
			},
			Result: []catalog.Field{
				{Name: "is leap year", Type: catalog.Boolean, Description: "Whether."},
				{Name: "1st", Type: catalog.String},
				{Name: "scores", Type: catalog.Array, Items: &catalog.Field{Type: catalog.Number}},
				{Name: "nested", Type: catalog.Object, Fields: []catalog.Field{{Name: "a-b", Type: catalog.Integer}}},
				{Name: "rows", Type: catalog.Array, Items: &catalog.Field{Type: catalog.Object, Fields: []catalog.Field{{Name: "n", Type: catalog.Integer}}}},
				{Name: "raw", Type: catalog.JSON},
			},
		}
		switch i % 4 {
		case 1:
			def.Method = http.MethodPost
		case 2:
			def.Method = http.MethodPost
			def.File = &catalog.FileField{Name: "document", Types: []string{"application/pdf", "application/vnd.ms-fontobject"}, MaxBytes: 1 << 20}
		case 3:
			def.Params = nil // an API without parameters
			def.Result = nil // and with a free-form result
		}
		a, err := catalog.Compile(def)
		if err != nil {
			tb.Fatal(err)
		}
		apis[i] = a
	}
	return apis
}

// synthOptions are the generator's options for the synthetic catalog, with an
// operator's brand of its own (the sample catalog's packages have the default one).
var synthOptions = options{goImport: "synth/clients/go", npmScope: "@synth", pyPrefix: "synth", javaPackage: "synth.clients", phpNamespace: "Synth", dotnetNamespace: "Synth", dartPrefix: "synth",
	baseURL: "https://api.example.com", command: "acme-cloud", envPrefix: "ACME_CLOUD"}

// noPrevious is the prev function of a first generation.
func noPrevious(string) (*meta, error) { return nil, nil }

// TestSyntheticCatalog generates the packages of a catalog that uses every feature and
// checks that each language accepts them: Go vets them in a module of their own, node
// imports the JavaScript and tsc checks its declarations, python3 imports the Python,
// mcs and javac compile the .NET and Java, php lints and loads the PHP, and the Dart
// grammar parses the Dart. The languages but Go run in the full suite ([toolchain]).
// The packages have the brand of synthOptions: no file names Tollgate's variable or
// error classes, and the Python package, run, has AcmeCloudError as its base error
// class and refuses a missing key naming ACME_CLOUD_API_KEY.
func TestSyntheticCatalog(t *testing.T) {
	apis := syntheticCatalog(t, 4)
	out := t.TempDir()
	files, err := generate(apis, languages, synthOptions, noPrevious)
	if err != nil {
		t.Fatal(err)
	}
	branded := map[string]bool{}
	for _, f := range files {
		text := f.path + "\n" + string(f.data)
		for _, leak := range []string{"TOLLGATE", "TollgateError", "TollgateException", "tollgate;"} {
			if strings.Contains(text, leak) {
				t.Errorf("%s has %q, not the brand's names", f.path, leak)
			}
		}
		lang := strings.SplitN(f.path, "/", 2)[0]
		if strings.HasSuffix(f.path, "README.md") && strings.Contains(text, "ACME_CLOUD_API_KEY") &&
			(lang == "go" || strings.Contains(text, "AcmeCloudError") || strings.Contains(text, "AcmeCloudException")) {
			branded[lang] = true
		}
	}
	for _, l := range languages {
		if !branded[l] {
			t.Errorf("no %s README names ACME_CLOUD_API_KEY and the base error class of the brand", l)
		}
	}
	if err := writeFiles(out, files); err != nil {
		t.Fatal(err)
	}

	t.Run("go", func(t *testing.T) {
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		mod := fmt.Sprintf("module synth\n\ngo 1.25.0\n\nrequire github.com/tollgate-dev/tollgate v0.0.0\n\nreplace github.com/tollgate-dev/tollgate => %s\n", root)
		if err := os.WriteFile(filepath.Join(out, "go.mod"), []byte(mod), 0o644); err != nil {
			t.Fatal(err)
		}
		sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "go.sum"), sum, 0o644); err != nil {
			t.Fatal(err)
		}
		// The module is named synth, and the packages were generated as synth/clients/go;
		// move them there.
		if err := os.MkdirAll(filepath.Join(out, "clients"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(out, "go"), filepath.Join(out, "clients", "go")); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), "go", "vet", "./...")
		cmd.Dir = out
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go vet: %v\n%s", err, b)
		}
	})
	t.Run("js", func(t *testing.T) {
		toolchain(t, "JavaScript")
		node := testenv.Program(t, "node")
		var imports []string
		for _, a := range apis {
			imports = append(imports, fmt.Sprintf("await import(%q);", filepath.Join(out, "js", a.ID, "index.js")))
		}
		if b, err := exec.CommandContext(t.Context(), node, "--input-type=module", "-e", strings.Join(imports, "\n")).CombinedOutput(); err != nil {
			t.Fatalf("node: %v\n%s", err, b)
		}
		tsc := testenv.NodeTool(t, "tsc")
		args := []string{"--noEmit", "--strict"}
		for _, a := range apis {
			args = append(args, filepath.Join(out, "js", a.ID, "index.d.ts"))
		}
		if b, err := exec.CommandContext(t.Context(), tsc, args...).CombinedOutput(); err != nil {
			t.Fatalf("tsc: %v\n%s", err, b)
		}
	})
	t.Run("dart", func(t *testing.T) {
		toolchain(t, "Dart")
		if errs := dartSyntaxErrors(t, sourceFiles(t, filepath.Join(out, "dart"), ".dart")); len(errs) > 0 {
			t.Fatalf("syntax errors:\n\t%s", strings.Join(errs, "\n\t"))
		}
	})
	t.Run("dotnet", func(t *testing.T) {
		toolchain(t, ".NET")
		m := findMono(t)
		m.compilePackages(t, filepath.Join(out, "dotnet"), t.TempDir())
	})
	t.Run("java", func(t *testing.T) {
		toolchain(t, "Java")
		j := findJDK(t)
		j.compile(t, t.TempDir(), j.classpath, sourceFiles(t, filepath.Join(out, "java"), ".java"))
	})
	t.Run("php", func(t *testing.T) {
		toolchain(t, "PHP")
		php := findPHP(t)
		phpLint(t, php, filepath.Join(out, "php"))
		var dirs []string
		for _, a := range apis {
			dirs = append(dirs, filepath.Join(out, "php", a.ID))
		}
		// Each package's classes load (constant expressions included) under every
		// notice and deprecation.
		load := fmt.Sprintf("require %q; foreach (array_slice($argv, 1) as $d) { register_package($d); $c = json_decode(file_get_contents($d . '/composer.json'), true); $ns = array_key_first($c['autoload']['psr-4']); foreach (glob($d . '/src/*.php') as $f) { $class = $ns . basename($f, '.php'); if (!class_exists($class)) { exit(1); } (new ReflectionClass($class))->getConstants(); } }", mustAbs(t, "testdata/psr4.php"))
		if b, err := exec.CommandContext(t.Context(), php, append([]string{"-d", "error_reporting=-1", "-r", load, "--"}, dirs...)...).CombinedOutput(); err != nil || len(b) > 0 {
			t.Fatalf("php: %v\n%s", err, b)
		}
	})
	t.Run("python", func(t *testing.T) {
		toolchain(t, "Python")
		python := testenv.Program(t, "python3")
		var paths, imports []string
		for _, a := range apis {
			paths = append(paths, filepath.Join(out, "python", a.ID))
			imports = append(imports, "import synth_"+strings.ReplaceAll(a.ID, "-", "_"))
		}
		// A client made without a key is refused with the brand's class and variable.
		imports = append(imports, `
if not issubclass(synth_synthetic_000.ValidationError, synth_synthetic_000.AcmeCloudError):
    raise SystemExit("ValidationError does not extend AcmeCloudError")
try:
    synth_synthetic_000.Synthetic000Client("")
    raise SystemExit("a client was made without a key")
except TypeError as e:
    if 'os.environ["ACME_CLOUD_API_KEY"]' not in str(e):
        raise SystemExit("the message does not name ACME_CLOUD_API_KEY: %s" % e)`)
		cmd := exec.CommandContext(t.Context(), python, "-c", strings.Join(imports, "\n"))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+strings.Join(paths, string(os.PathListSeparator)), "PYTHONDONTWRITEBYTECODE=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("python3: %v\n%s", err, b)
		}
	})
}

// BenchmarkGenerate measures the generation of the packages of a 300-API synthetic
// catalog in every language (rendering, formatting the Go code), in memory and
// with the files written.
//
//	go test -run '^$' -bench Generate -benchtime 5x ./internal/clientgen
func BenchmarkGenerate(b *testing.B) {
	apis := syntheticCatalog(b, 300)
	o := synthOptions
	b.Run("memory", func(b *testing.B) {
		var files, size int
		for b.Loop() {
			out, err := generate(apis, languages, o, noPrevious)
			if err != nil {
				b.Fatal(err)
			}
			files, size = len(out), 0
			for _, f := range out {
				size += len(f.data)
			}
		}
		b.ReportMetric(float64(files), "files")
		b.ReportMetric(float64(size)/(1<<20), "MiB")
	})
	b.Run("written", func(b *testing.B) {
		for b.Loop() {
			dir := b.TempDir()
			out, err := generate(apis, languages, o, noPrevious)
			if err != nil {
				b.Fatal(err)
			}
			if err := writeFiles(dir, out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestValidationAgrees checks that the packages judge parameters as the catalog does:
// a table of inputs covering every rule goes through the Go validation and through the
// package of each language that runs here (against a server that accepts anything),
// and each must accept the same inputs and name the same parameter for the others.
// The formats' inputs probe the edges of the service's parsers (Go's net/url and
// net/netip) and string lengths past U+FFFF. The languages run in the full suite
// ([toolchain]).
func TestValidationAgrees(t *testing.T) {
	api := syntheticCatalog(t, 2)[1] // POST, every rule
	out := t.TempDir()
	files, err := generate([]*catalog.API{api}, agreeLanguages, synthOptions, noPrevious)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFiles(out, files); err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accepted.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Credits-Remaining", "1")
		w.Write([]byte(`{"status":"ok","error":null,"data":{}}`))
	}))
	t.Cleanup(srv.Close)
	inputs := agreeInputs()
	// What the catalog says: "" for accepted, else the parameter it names.
	want := make([]string, len(inputs))
	ok := 0
	for i, in := range inputs {
		b, _ := json.Marshal(in)
		var decoded map[string]any
		json.Unmarshal(b, &decoded)
		if _, err := api.ValidateJSON(decoded); err != nil {
			var pe *catalog.ParamError
			if !errors.As(err, &pe) {
				t.Fatalf("input %d: %v", i, err)
			}
			want[i] = pe.Param
		} else {
			ok++
		}
	}
	if ok < 30 || len(want)-ok < 50 {
		t.Errorf("the table has %d accepted and %d refused inputs; it should exercise both: %q", ok, len(want)-ok, want)
	}
	typed := func(class, method string, inputs []map[string]any) []typedCase {
		cases := make([]typedCase, len(inputs))
		for i, in := range inputs {
			cases[i] = typedCase{fmt.Sprint(i), class, testserver.PrimaryKey, srv.URL, method, []any{in}}
		}
		return cases
	}
	wantAll := want
	drivers := map[string]func(t *testing.T, inputs []map[string]any) driverOutput{
		"js": func(t *testing.T, inputs []map[string]any) driverOutput {
			node := testenv.Program(t, "node")
			var cases []jsCase
			for i, in := range inputs {
				cases = append(cases, jsCase{Name: fmt.Sprint(i), Module: filepath.Join(out, "js", api.ID, "index.js"), Class: "Synthetic001Client",
					Options: map[string]any{"api_key": testserver.PrimaryKey, "base_url": srv.URL}, Method: "execute", Args: []any{in}})
			}
			return runDriver(t, exec.CommandContext(t.Context(), node, "testdata/drive.mjs"), cases)
		},
		"python": func(t *testing.T, inputs []map[string]any) driverOutput {
			python := testenv.Program(t, "python3")
			var cases []pyCase
			for _, in := range inputs {
				cases = append(cases, pyCase{"", "synth_synthetic_001", "Synthetic001Client",
					[]any{testserver.PrimaryKey}, map[string]any{"base_url": srv.URL}, "execute", []any{in}})
			}
			py := exec.CommandContext(t.Context(), python, "testdata/drive.py")
			py.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(out, "python", api.ID), "PYTHONDONTWRITEBYTECODE=1")
			return runDriver(t, py, cases)
		},
		"php": func(t *testing.T, inputs []map[string]any) driverOutput {
			php := findPHP(t)
			return runDriver(t, phpDriver(t, php, []string{filepath.Join(out, "php", api.ID)}), typed(phpClass("Synth")(api.ID), "execute", inputs))
		},
		"dotnet": func(t *testing.T, inputs []map[string]any) driverOutput {
			m := findMono(t)
			dir := t.TempDir()
			m.compilePackages(t, filepath.Join(out, "dotnet"), dir)
			return runDriver(t, m.driver(t, dir), typed(dotnetClass("Synth")(api.ID), "ExecuteAsync", inputs))
		},
		"java": func(t *testing.T, inputs []map[string]any) driverOutput {
			j := findJDK(t)
			classes := t.TempDir()
			j.compile(t, classes, j.classpath, append(sourceFiles(t, filepath.Join(out, "java"), ".java"), "testdata/Drive.java"))
			cp := classes + string(os.PathListSeparator) + j.classpath
			return runDriver(t, exec.CommandContext(t.Context(), j.java, "-cp", cp, "Drive"), typed(javaClass("synth.clients")(api.ID), "execute", inputs))
		},
	}
	for _, lang := range agreeLanguages {
		t.Run(lang, func(t *testing.T) {
			toolchain(t, lang)
			accepted.Store(0)
			inputs, want, ok := inputs, want, ok
			if lang == "js" || lang == "python" {
				// Their URL check is their platform's parser (WHATWG URL, urllib.parse),
				// which differs from the service's at the edges: they get every input
				// but the URL format's edges.
				inputs, want, ok = nil, nil, 0
				for i, in := range agreeInputs() {
					if _, site := in["site"]; !site {
						inputs, want = append(inputs, in), append(want, wantAll[i])
					}
				}
				for _, w := range want {
					if w == "" {
						ok++
					}
				}
			}
			report := drivers[lang](t, inputs)
			if len(report.Results) != len(inputs) {
				t.Fatalf("%d results, want %d", len(report.Results), len(inputs))
			}
			for i, r := range report.Results {
				got := ""
				if !r.OK {
					got = r.Error.Param
					if !strings.HasPrefix(r.Error.Class, "Validation") {
						got = "(" + r.Error.Class + ": " + r.Error.Message + ")"
					}
				}
				if got != want[i] {
					t.Errorf("input %d %v: the package says %q, the catalog %q", i, inputs[i], got, want[i])
				}
			}
			if n := accepted.Load(); n != int64(ok) {
				t.Errorf("%d calls reached the server, want %d (the accepted inputs)", n, ok)
			}
		})
	}
}

// agreeLanguages are the languages whose packages TestValidationAgrees runs.
var agreeLanguages = []string{"js", "python", "dotnet", "java", "php"}

// agreeInputs returns the inputs of TestValidationAgrees: parameters of the second
// synthetic API.
func agreeInputs() []map[string]any {
	inputs := []map[string]any{
		{"text": "a"},
		{},
		{"text": ""},
		{"text": strings.Repeat("é", 201)},
		{"text": 5},
		{"text": "a", "mode": "slow"},
		{"text": "a", "mode": "it's"},
		{"text": "a", "mode": nil},
		{"text": "a", "count": 11},
		{"text": "a", "count": 2.5},
		{"text": "a", "count": 3.0},
		{"text": "a", "count": "3"},
		{"text": "a", "ratio": 0.7},
		{"text": "a", "ratio": 1},
		{"text": "a", "ratio": -1.5},
		{"text": "a", "flag": "yes"},
		{"text": "a", "flag": false},
		{"text": "a", "day-of-week": "2024-1-1"},
		{"text": "a", "day-of-week": "2024-01-01"},
		{"text": "a", "class": "not-an-email"},
		{"text": "a", "class": "a@b@c.io"},
		{"text": "a", "class": "a@b.co"},
		{"text": "a", "ip": "1.2.3.4"},
		{"text": "a", "ip": "::1"},
		{"text": "a", "ip": "2001:db8::ff00:42:8329"},
		{"text": "a", "ip": "1.2.3"},
		{"text": "a", "ip": "256.1.1.1"},
		{"text": "a", "ip": "fe80::1%eth0"},
		{"text": "a", "color": "#abc"},
		{"text": "a", "color": "A1B2C3"},
		{"text": "a", "color": "#abcd"},
		{"text": "a", "tags": []any{"x", "y"}},
		{"text": "a", "tags": []any{strings.Repeat("x", 21)}},
		{"text": "a", "tags": []any{"1", "2", "3", "4", "5", "6"}},
		{"text": "a", "tags": "x"},
		{"text": "a", "tags": []any{"x", nil}},
		{"text": "a", "point": map[string]any{"x": 1}},
		{"text": "a", "point": map[string]any{}},
		{"text": "a", "point": map[string]any{"x": 1, "y": 2}},
		{"text": "a", "point": map[string]any{"x": "1"}},
		{"text": "a", "point": []any{1}},
		{"text": "a", "items": []any{map[string]any{"id": 1}}},
		{"text": "a", "items": []any{map[string]any{"id": "a"}}},
		{"text": "a", "items": []any{map[string]any{}}},
		{"text": "a", "zzz": 1, "aaa": 2},
	}
	// The formats' edges, and lengths in characters past U+FFFF.
	edges := map[string][]string{
		"site": {"http://a:b:80/", "http://h/%zz", "http://h/?%zz", "http://h/#%zz", "HTTP://h", "http:/h", "http:h",
			"http://[::1]:80/", "http://[1.2.3.4]/", "http://%41/", "http://%c3%a9/", "http://u{@h/", `http://h\x/`, "http://:80",
			"http://a]b/", "http://[fe80::1%25en0]/", "http://[fe80::1%25]/", "http://x[::1]/", "ftp://h/", "http://", "http://h/ x",
			"http://h/\u00a0", "http://\u00e9.example/", "https://user:p@ss@h/", "http://h:8a/", "http://h#\u0001", "http://h/\u0001",
			"http://[::1]x/", "http://h:/", "//h/", "http://@/", "http://[::ffff:1.2.3.4]/"},
		"ip": {"01.2.3.4", "0.0.0.0", "::", "1::2::3", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8::", "1:2:3:4:5:6:7::",
			"12345::", "::1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", ":1::", "1:", "::1:", "1.2.3.4:80", "::ffff:1.2.3.04",
			"abcd::ABCD", "g::1", "1.2.3.4.5", "1..2.3"},
		"class":       {"a@b.c", "@b.c", "a@b.", "a@.b", "a b@c.d", "\u00e9@\u00fc.de", "a@b.c\u2028"},
		"day-of-week": {"2024-13-45", "\uff12024-01-01", "2024-01-01\n", "2024-01-1a"},
		"color":       {"##abc", "abc", "#ABCDEF", "#12345g"},
		"text":        {strings.Repeat("\U0001F600", 200), strings.Repeat("\U0001F600", 201)},
	}
	for _, name := range slices.Sorted(maps.Keys(edges)) {
		for _, v := range edges[name] {
			inputs = append(inputs, map[string]any{"text": "a", name: v})
		}
	}
	return inputs
}
