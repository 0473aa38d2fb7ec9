package clientgen

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/client"
)

// Limits on reading a catalog.
const (
	maxCatalogBytes = 64 << 20
	fetchTimeout    = 30 * time.Second
)

// defaultBaseURL is the service of packages generated from a catalog file.
const defaultBaseURL = "http://localhost:8080"

// config is what the flags set.
type config struct {
	catalog string
	out     string
	langs   []string
	opts    options
}

// Run executes the tollgate-gen command (see its documentation) with args, without
// the program name, and returns the exit status: 0 on success, 1 when the catalog
// cannot be read or the packages cannot be written, 2 for a usage mistake.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	apis, source, err := loadCatalog(ctx, cfg.catalog)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate-gen: %v\n", err)
		return 1
	}
	if cfg.opts.baseURL == "" {
		cfg.opts.baseURL = source
	}
	files, err := generate(apis, cfg.langs, cfg.opts, func(dir string) (*meta, error) {
		return readMeta(filepath.Join(cfg.out, dir, metaFile))
	})
	if err == nil {
		err = writeFiles(cfg.out, files)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate-gen: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "tollgate-gen: %d APIs, %s packages in %s\n", len(apis), strings.Join(cfg.langs, ", "), cfg.out)
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var langs string
	fs := flag.NewFlagSet("tollgate-gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.catalog, "catalog", "", "the catalog: a GET /v1/catalog `URL` or a saved copy (required)")
	fs.StringVar(&cfg.out, "out", "", "the `directory` of the packages (required)")
	fs.StringVar(&langs, "lang", strings.Join(languages, ","), "the `languages`, comma-separated")
	fs.StringVar(&cfg.opts.baseURL, "base-url", "", "the service the packages call by default (default: the catalog's, or "+defaultBaseURL+")")
	fs.StringVar(&cfg.opts.goImport, "go-import", DefaultGoImport, "import `path` of the directory of the Go packages")
	fs.StringVar(&cfg.opts.npmScope, "npm-scope", DefaultNPMScope, "npm `scope` of the JavaScript packages")
	fs.StringVar(&cfg.opts.pyPrefix, "python-prefix", DefaultPythonPrefix, "`prefix` of the Python distributions and modules")
	fs.StringVar(&cfg.opts.dotnetNamespace, "dotnet-namespace", DefaultDotnetNamespace, ".NET `namespace` that holds the .NET packages' namespaces (and starts their NuGet ids)")
	fs.StringVar(&cfg.opts.phpNamespace, "php-namespace", DefaultPHPNamespace, "PHP `namespace` that holds the PHP packages' namespaces (and names their Composer vendor)")
	fs.StringVar(&cfg.opts.dartPrefix, "dart-prefix", DefaultDartPrefix, "`prefix` of the Dart packages' names (tollgate_hash)")
	fs.StringVar(&cfg.opts.javaPackage, "java-package", DefaultJavaPackage, "Java `package` (and Maven group) that holds the Java packages")
	fs.StringVar(&cfg.opts.command, "brand-command", brand.Default().Command, "the brand's `command`, which names the base error class (acme: AcmeError, AcmeException) and the packages, unless the flags above name them (acme: @acme, Acme, ...)")
	fs.StringVar(&cfg.opts.envPrefix, "brand-env", brand.Default().EnvPrefix, "the brand's `prefix` of environment variables (ACME: the examples read ACME_API_KEY)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: tollgate-gen -catalog URL|FILE -out DIR [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	// The names that no flag set follow the brand's command.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := brand.CheckCommand(cfg.opts.command); err == nil {
		def := BrandNames(cfg.opts.command)
		for _, n := range []struct {
			flag       string
			name, from *string
		}{
			{"go-import", &cfg.opts.goImport, &def.GoImport}, {"npm-scope", &cfg.opts.npmScope, &def.NPMScope},
			{"python-prefix", &cfg.opts.pyPrefix, &def.PythonPrefix}, {"dotnet-namespace", &cfg.opts.dotnetNamespace, &def.DotnetNamespace},
			{"php-namespace", &cfg.opts.phpNamespace, &def.PHPNamespace}, {"dart-prefix", &cfg.opts.dartPrefix, &def.DartPrefix},
			{"java-package", &cfg.opts.javaPackage, &def.JavaPackage},
		} {
			if !set[n.flag] {
				*n.name = *n.from
			}
		}
	}
	problem := ""
	switch {
	case fs.NArg() > 0:
		problem = fmt.Sprintf("unexpected arguments %q", fs.Args())
	case cfg.catalog == "" || cfg.out == "":
		problem = "-catalog and -out are required"
	default:
		problem = checkNames(cfg.opts)
	}
	for _, l := range strings.Split(langs, ",") {
		if !slices.Contains(languages, l) {
			problem = fmt.Sprintf("-lang: %q is not one of %s", l, strings.Join(languages, ", "))
		}
		if !slices.Contains(cfg.langs, l) {
			cfg.langs = append(cfg.langs, l)
		}
	}
	if cfg.opts.baseURL != "" {
		if u, err := url.Parse(cfg.opts.baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problem = fmt.Sprintf("-base-url %q must be an http or https address", cfg.opts.baseURL)
		}
	}
	if problem != "" {
		fmt.Fprintln(stderr, "tollgate-gen:", problem)
		fs.Usage()
		return cfg, errors.New(problem)
	}
	return cfg, nil
}

// checkNames says what is wrong with the settings that name the packages, with the
// flag's name, or returns "".
func checkNames(o options) string {
	switch {
	case !strings.HasPrefix(o.npmScope, "@") || strings.Contains(o.npmScope, "/"):
		return fmt.Sprintf("-npm-scope %q must look like @scope", o.npmScope)
	case !javaPackageName.MatchString(o.javaPackage):
		return fmt.Sprintf("-java-package %q must be dot-separated lowercase identifiers, such as com.example.clients", o.javaPackage)
	case !dotnetNamespaceName.MatchString(o.dotnetNamespace):
		return fmt.Sprintf("-dotnet-namespace %q must be capitalized names separated by dots, such as Acme.Clients", o.dotnetNamespace)
	case !phpNamespaceName.MatchString(o.phpNamespace):
		return fmt.Sprintf(`-php-namespace %q must be capitalized names separated by \, such as Acme\Clients`, o.phpNamespace)
	case !dartPrefixName.MatchString(o.dartPrefix):
		return fmt.Sprintf("-dart-prefix %q must be lowercase letters, digits and _, starting with a letter", o.dartPrefix)
	case !pyIdent.MatchString(strings.ReplaceAll(o.pyPrefix, "-", "_")):
		return fmt.Sprintf("-python-prefix %q must be letters, digits, _ and -, starting with a letter", o.pyPrefix)
	}
	if err := brand.CheckCommand(o.command); err != nil {
		return "-brand-command: " + strings.TrimPrefix(err.Error(), "brand: ")
	}
	if err := brand.CheckEnvPrefix(o.envPrefix); err != nil {
		return "-brand-env: " + strings.TrimPrefix(err.Error(), "brand: ")
	}
	for _, class := range []string{pascal(o.command) + "Error", pascal(o.command) + "Exception"} {
		if templateClasses()[class] {
			return fmt.Sprintf("-brand-command %q would name the packages' base error class %s, a name their code already uses for another class; choose another command", o.command, class)
		}
	}
	return ""
}

// templateClasses are the names of the error and exception classes that the
// templates name, the base class aside: no brand may give the base class one of them.
var templateClasses = sync.OnceValue(func() map[string]bool {
	names := map[string]bool{}
	class := regexp.MustCompile(`\b[A-Z][A-Za-z0-9_]*(Error|Exception)\b`)
	fs.WalkDir(templateFS, "templates", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			src, _ := templateFS.ReadFile(p) // the embedded files read
			for _, n := range class.FindAllString(string(src), -1) {
				names[n] = true
			}
		}
		return nil
	})
	return names
})

// loadCatalog reads and compiles the catalog at src, a URL or a file, and returns the
// APIs sorted by id, with the base URL of the service it came from (the default base
// URL for a file).
func loadCatalog(ctx context.Context, src string) ([]*catalog.API, string, error) {
	var (
		defs []catalog.API
		base = defaultBaseURL
		err  error
	)
	if u, perr := url.Parse(src); perr == nil && (u.Scheme == "http" || u.Scheme == "https") {
		defs, err = fetchCatalog(ctx, src)
		base = strings.TrimSuffix(strings.TrimSuffix(src, "/"), "/v1/catalog")
	} else {
		var f *os.File
		if f, err = os.Open(src); err == nil {
			defs, err = client.DecodeCatalog(f, maxCatalogBytes)
			f.Close()
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading the catalog %s: %w", src, err)
	}
	apis := make([]*catalog.API, 0, len(defs))
	seen := map[string]bool{}
	for _, d := range defs {
		a, err := catalog.Compile(d)
		if err != nil {
			return nil, "", fmt.Errorf("the catalog %s: %w", src, err)
		}
		if seen[a.ID] {
			return nil, "", fmt.Errorf("the catalog %s lists the %s API twice", src, a.ID)
		}
		seen[a.ID] = true
		apis = append(apis, a)
	}
	slices.SortFunc(apis, func(a, b *catalog.API) int { return strings.Compare(a.ID, b.ID) })
	return apis, base, nil
}

// fetchCatalog reads GET /v1/catalog at u.
func fetchCatalog(ctx context.Context, u string) ([]catalog.API, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the service answered %s", resp.Status)
	}
	return client.DecodeCatalog(resp.Body, maxCatalogBytes)
}

// A genFile is one generated file, by its path under the output directory.
type genFile struct {
	path string
	data []byte
}

// generate renders the packages of every API in each language. prev reads the
// metadata of the package generated earlier in a directory (relative to the output),
// or returns nil. The packages are rendered in parallel, one per CPU, and returned in
// a fixed order: by language, then by API.
func generate(apis []*catalog.API, langs []string, o options, prev func(dir string) (*meta, error)) ([]genFile, error) {
	tmpls, err := loadTemplates()
	if err != nil {
		return nil, err
	}
	type job struct {
		l   *language
		api *catalog.API
	}
	var jobs []job
	for _, lang := range langs {
		for _, api := range apis {
			jobs = append(jobs, job{languageNamed(lang), api})
		}
	}
	files := make([][]genFile, len(jobs))
	errs := make([]error, len(jobs))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(jobs); i = int(next.Add(1) - 1) {
				files[i], errs[i] = generatePackage(jobs[i].l, tmpls[jobs[i].l.name], jobs[i].api, o, prev)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Concat(files...), nil
}

// generatePackage renders the package of one API in one language.
func generatePackage(l *language, tmpl *template.Template, api *catalog.API, o options, prev func(dir string) (*meta, error)) ([]genFile, error) {
	dir := packagePath(l.name, l.dir(&model{API: api, GoPackage: goPackageName(api.ID)}))
	old, err := prev(dir)
	if err != nil {
		return nil, err
	}
	version, err := nextVersion(old, api)
	if err != nil {
		return nil, err
	}
	m, err := newModel(api, o, version)
	if err != nil {
		return nil, err
	}
	if l.prepare != nil {
		l.prepare(m, o)
	}
	out := make([]genFile, 0, len(l.files)+1)
	for _, f := range l.files {
		data, err := render(tmpl, f, m)
		if err != nil {
			return nil, err
		}
		out = append(out, genFile{dir + "/" + f.path(m), data})
	}
	metaData, err := encodeMeta(api, version)
	if err != nil {
		return nil, err
	}
	return append(out, genFile{dir + "/" + metaFile, metaData}), nil
}

func packagePath(lang, dir string) string { return lang + "/" + dir }

// writeFiles writes the files under root. In each package directory that the
// generator wrote before (it holds api.json), files it no longer generates are removed.
// Files whose content did not change are left untouched.
func writeFiles(root string, files []genFile) error {
	byDir := map[string]map[string]bool{}
	for _, f := range files {
		dir := packageDir(f.path)
		if byDir[dir] == nil {
			byDir[dir] = map[string]bool{}
		}
		byDir[dir][filepath.FromSlash(f.path)] = true
	}
	for dir, keep := range byDir {
		if err := removeStale(root, dir, keep); err != nil {
			return err
		}
	}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.path))
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// packageDir returns the package directory of a generated path: lang/<dir>.
func packageDir(p string) string {
	parts := strings.SplitN(p, "/", 3)
	return parts[0] + "/" + parts[1]
}

// removeStale removes the files of a generated package directory that are not in
// keep (paths relative to root).
func removeStale(root, dir string, keep map[string]bool) error {
	abs := filepath.Join(root, filepath.FromSlash(dir))
	if _, err := os.Stat(filepath.Join(abs, metaFile)); err != nil {
		return nil // not generated before, or not by this generator: leave it alone
	}
	return filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if !keep[rel] {
			return os.Remove(p)
		}
		return nil
	})
}
