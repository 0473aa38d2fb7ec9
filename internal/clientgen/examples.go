package clientgen

import (
	"bytes"
	"errors"
	"strings"
	"sync"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/catalog"
)

// Names are the settings of the tollgate-gen flags that name the packages: the import
// path of the Go packages' directory (-go-import), the npm scope (-npm-scope), the
// prefix of the Python distributions (-python-prefix), the .NET namespace
// (-dotnet-namespace), the Java package (-java-package), the PHP namespace
// (-php-namespace) and the prefix of the Dart packages (-dart-prefix); and those of the
// operator's brand (package brand): its command, which names the packages' base error
// class (-brand-command: acme gives AcmeError and AcmeException), and the prefix of the
// environment variable their examples and messages read the key from (-brand-env: ACME
// gives ACME_API_KEY). An empty field takes the flag's default; the defaults of the
// packages' names follow the brand's command ([BrandNames]).
type Names struct {
	GoImport, NPMScope, PythonPrefix, DotnetNamespace, JavaPackage, PHPNamespace, DartPrefix string
	BrandCommand, BrandEnv                                                                   string
}

// The defaults of the flags that name the packages, those of the default brand's
// command, tollgate ([BrandNames]).
const (
	DefaultGoImport        = "example.com/tollgate/clients"
	DefaultNPMScope        = "@tollgate"
	DefaultPythonPrefix    = "tollgate"
	DefaultDotnetNamespace = "Tollgate"
	DefaultJavaPackage     = "dev.tollgate.clients"
	DefaultPHPNamespace    = "Tollgate"
	DefaultDartPrefix      = "tollgate"
)

// Check reports the first setting of n that the generator's flag would refuse, with
// the flag's name, or nil.
func (n Names) Check() error {
	if p := checkNames(n.options()); p != "" {
		return errors.New(p)
	}
	return nil
}

// options returns the generator's options of n, defaults filled in.
func (n Names) options() options {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	command := or(n.BrandCommand, brand.Default().Command)
	def := BrandNames(command)
	return options{
		goImport: or(n.GoImport, def.GoImport), npmScope: or(n.NPMScope, def.NPMScope),
		pyPrefix: or(n.PythonPrefix, def.PythonPrefix), dotnetNamespace: or(n.DotnetNamespace, def.DotnetNamespace),
		javaPackage: or(n.JavaPackage, def.JavaPackage), phpNamespace: or(n.PHPNamespace, def.PHPNamespace),
		dartPrefix: or(n.DartPrefix, def.DartPrefix),
		command:    command, envPrefix: or(n.BrandEnv, brand.Default().EnvPrefix),
	}
}

// BrandNames returns the default names of the packages for a brand's command (one
// that brand.CheckCommand accepts): acme gives example.com/acme/clients, @acme, acme,
// Acme, dev.acme.clients, Acme and acme; tollgate gives the Default names.
func BrandNames(command string) Names {
	return Names{
		GoImport: "example.com/" + command + "/clients", NPMScope: "@" + command, PythonPrefix: command,
		DotnetNamespace: pascal(command), JavaPackage: "dev." + javaPackageSegment(command) + ".clients",
		PHPNamespace: pascal(command), DartPrefix: strings.ReplaceAll(command, "-", "_"),
		BrandCommand: command,
	}
}

// An Example is the example call of one API's package in one language, as the
// package's README has it.
type Example struct {
	// Language is the generator's name of the language (its -lang value): go, js,
	// python, dotnet, java, php or dart.
	Language string
	// Title names the language for people: "Go", "JavaScript / TypeScript", ...
	Title string
	// Package is the package's name in its ecosystem: the Go import path, the npm
	// name, the Python distribution, the NuGet id, the Maven coordinates, the
	// Composer name or the pub name.
	Package string
	// Dir is the package's folder under the generator's -out directory.
	Dir string
	// Code is the example program. It reads the key from the brand's environment
	// variable (TOLLGATE_API_KEY) and calls the service the package was generated for.
	Code string
}

// exampleTemplates are the templates of each language's README example.
var exampleTemplates = map[string]struct{ title, template string }{
	"go":     {"Go", "goExample"},
	"js":     {"JavaScript / TypeScript", "jsExample"},
	"python": {"Python", "pyExample"},
	"dotnet": {".NET (C#)", "csExample"},
	"java":   {"Java", "javaExample"},
	"php":    {"PHP", "phpExample"},
	"dart":   {"Dart", "dartExample"},
}

// loaded holds the parsed templates, shared by every call of Examples.
var loaded = sync.OnceValues(loadTemplates)

// Examples returns the example call of api's package in every language the generator
// writes, in its order (Go, JavaScript, Python, .NET, Java, PHP, Dart), with the
// package names that names give: the code of each README's example, byte for byte.
// api must be compiled (by [catalog.Compile] or a registry).
func Examples(api *catalog.API, names Names) ([]Example, error) {
	if err := names.Check(); err != nil {
		return nil, err
	}
	o := names.options()
	tmpls, err := loaded()
	if err != nil {
		return nil, err
	}
	out := make([]Example, 0, len(allLanguages))
	for _, l := range allLanguages {
		m, err := newModel(api, o, "")
		if err != nil {
			return nil, err
		}
		if l.prepare != nil {
			l.prepare(m, o)
		}
		var b bytes.Buffer
		if err := tmpls[l.name].ExecuteTemplate(&b, exampleTemplates[l.name].template, m); err != nil {
			return nil, err
		}
		out = append(out, Example{Language: l.name, Title: exampleTemplates[l.name].title,
			Package: packageName(l.name, m), Dir: packagePath(l.name, l.dir(m)), Code: b.String()})
	}
	return out, nil
}

// packageName returns the name of a package in its ecosystem.
func packageName(lang string, m *model) string {
	switch lang {
	case "go":
		return m.GoImport
	case "js":
		return m.JSPackage
	case "python":
		return m.PyDist
	}
	return m.Package
}

// An Arg is one argument of an example call.
type Arg struct {
	// Name is the parameter's name in the catalog.
	Name string
	// Value obeys the parameter's rules: a string, int64, float64, bool, []any or
	// map[string]any.
	Value any
}

// ExampleArgs returns the arguments of the example call of api, as every generated
// README passes them: each required parameter, and each one with an example in the
// catalog, with a value that obeys its rules (its example, its default, its first
// allowed value, or one built from its type, format and bounds). The "url" parameter
// of a file API is never among them: the examples upload a file.
func ExampleArgs(api *catalog.API) ([]Arg, error) {
	m, err := newModel(api, options{}, "")
	if err != nil {
		return nil, err
	}
	args := make([]Arg, len(m.Example))
	for i, a := range m.Example {
		args[i] = Arg{Name: a.P.Name, Value: a.Value}
	}
	return args, nil
}
