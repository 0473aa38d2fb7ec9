package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/clientgen"
	"github.com/tollgate-dev/tollgate/internal/paramdoc"
)

// PackageNames are the names the host gave the generated client packages: the
// settings of tollgate-gen's flags of the same names. The APIs page shows each
// package's example with them. An empty field is the flag's default, which follows
// the command of Options.Brand (the defaults below are the default brand's; acme
// gives @acme, Acme, ...).
type PackageNames struct {
	// GoImport is -go-import, the import path of the folder of the Go packages
	// (default example.com/tollgate/clients).
	GoImport string
	// NPMScope is -npm-scope, the npm scope of the JavaScript packages (default
	// @tollgate).
	NPMScope string
	// PythonPrefix is -python-prefix, the prefix of the Python distributions and
	// modules (default tollgate).
	PythonPrefix string
	// DotnetNamespace is -dotnet-namespace (default Tollgate).
	DotnetNamespace string
	// JavaPackage is -java-package (default dev.tollgate.clients).
	JavaPackage string
	// PHPNamespace is -php-namespace (default Tollgate).
	PHPNamespace string
	// DartPrefix is -dart-prefix (default tollgate).
	DartPrefix string
}

// names returns the generator's names of the packages, with the brand's command and
// prefix of variables unless they are the default's.
func (h *Handler) names() clientgen.Names {
	n := h.packages
	out := clientgen.Names{GoImport: n.GoImport, NPMScope: n.NPMScope, PythonPrefix: n.PythonPrefix,
		DotnetNamespace: n.DotnetNamespace, JavaPackage: n.JavaPackage, PHPNamespace: n.PHPNamespace, DartPrefix: n.DartPrefix}
	if def := brand.Default(); h.brand.Command != def.Command || h.brand.EnvPrefix != def.EnvPrefix {
		out.BrandCommand, out.BrandEnv = h.brand.Command, h.brand.EnvPrefix
	}
	return out
}

// genFlags returns the tollgate-gen flags that give the packages the names of n, for
// the command the page shows.
func genFlags(n clientgen.Names) string {
	var b strings.Builder
	for _, f := range []struct{ flag, value string }{
		{"-go-import", n.GoImport}, {"-npm-scope", n.NPMScope}, {"-python-prefix", n.PythonPrefix},
		{"-dotnet-namespace", n.DotnetNamespace}, {"-java-package", n.JavaPackage},
		{"-php-namespace", n.PHPNamespace}, {"-dart-prefix", n.DartPrefix},
		{"-brand-command", n.BrandCommand}, {"-brand-env", n.BrandEnv},
	} {
		if f.value != "" {
			b.WriteString(" " + f.flag + " " + shellQuote(f.value))
		}
	}
	return b.String()
}

// exampleFile is the file name the snippets of a file API upload, as the generated
// packages' examples do.
const exampleFile = "photo.png"

// exampleFileURL is the address the URL-form snippets of a file API give.
const exampleFileURL = "https://example.com/photo.png"

// A code is one ready-to-copy snippet.
type code struct {
	// ID is the text area's id; Title names it; Note says what it needs.
	ID, Title, Note string
	// Package is the package to install, for a generated package.
	Package, Dir string
	Text         string
	Rows         int
}

func newCode(id, title, note, text string) code {
	return code{ID: id, Title: title, Note: note, Text: text, Rows: min(strings.Count(text, "\n")+2, 30)}
}

// baseURL returns the service's root URL: Options.PublicURL if set, else the scheme
// and host the request came to (http unless it came over TLS: a host behind a proxy
// that ends TLS sets PublicURL). A host that is not a plain host name or address with
// a port gives a placeholder, so that no request can put text of its own into a
// command the person copies.
func (h *Handler) baseURL(r *http.Request) string {
	if h.publicURL != "" {
		return h.publicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if host == "" || len(host) > 255 || strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != "" {
		host = "YOUR_" + h.brand.EnvPrefix + "_HOST"
	}
	return scheme + "://" + host
}

// snippets returns the snippets of api for the service at base: curl, the command-line
// client, and the example of each generated package. Their arguments are those of the
// generated packages' examples, which obey the API's rules.
func (h *Handler) snippets(api *catalog.API, base string) ([]code, []code, error) {
	args, err := clientgen.ExampleArgs(api)
	if err != nil {
		return nil, nil, err
	}
	var shell []code
	shell = append(shell, curlSnippets(api, base, args, h.brand)...)
	shell = append(shell, cliSnippets(api, base, args, h.brand)...)
	examples, err := clientgen.Examples(api, h.names())
	if err != nil {
		return nil, nil, err
	}
	pkgs := make([]code, len(examples))
	for i, ex := range examples {
		pkgs[i] = newCode("snippet-"+ex.Language, ex.Title, "", ex.Code)
		pkgs[i].Package, pkgs[i].Dir = ex.Package, ex.Dir
	}
	return shell, pkgs, nil
}

// curlSnippets returns the curl commands of a call: the query string of a GET, a JSON
// body for a POST, a multipart upload for a file API (and its URL form, a JSON body
// with url). The key comes from the brand's $TOLLGATE_API_KEY; -i shows the credit
// headers.
func curlSnippets(api *catalog.API, base string, args []clientgen.Arg, b brand.Brand) []code {
	u := base + "/v1/" + api.ID
	head := "curl -sS -i "
	key := ` \` + "\n  -H \"x-api-key: $" + b.KeyVar() + `"`
	if api.Method == http.MethodGet {
		q := url.Values{}
		for _, a := range args {
			for _, v := range textValues(a.Value) {
				q.Add(a.Name, v)
			}
		}
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		return []code{newCode("snippet-curl", "curl", "", head+shellQuote(u)+key)}
	}
	jsonCall := func(extra ...clientgen.Arg) string {
		return head + shellQuote(u) + key + ` \` + "\n  -H 'Content-Type: application/json'" + ` \` + "\n  --data " +
			shellQuote(jsonObject(append(args, extra...)))
	}
	if api.File == nil {
		return []code{newCode("snippet-curl", "curl", "", jsonCall())}
	}
	upload := head + shellQuote(u) + key + ` \` + "\n  -F " + shellQuote(api.File.Name+"=@"+exampleFile)
	for _, a := range args {
		for _, v := range textValues(a.Value) {
			upload += ` \` + "\n  --form-string " + shellQuote(a.Name+"="+v)
		}
	}
	return []code{
		newCode("snippet-curl", "curl, uploading a file", "Run it where "+exampleFile+" is.", upload),
		newCode("snippet-curl-url", "curl, with the file's address", "The service fetches the file.",
			jsonCall(clientgen.Arg{Name: catalog.URLParam, Value: exampleFileURL})),
	}
}

// cliSnippets returns the commands of the brand's command-line client (tollgate), which
// reads the key from $TOLLGATE_API_KEY and the service from $TOLLGATE_BASE_URL (the
// brand's variables).
func cliSnippets(api *catalog.API, base string, args []clientgen.Arg, b brand.Brand) []code {
	cmd := b.BaseURLVar() + "=" + shellQuote(base) + " " + b.Command + " " + api.ID
	for _, a := range args {
		for _, v := range textValues(a.Value) {
			if strings.HasPrefix(v, "-") {
				cmd += " --" + a.Name + "=" + shellQuote(v)
			} else {
				cmd += " --" + a.Name + " " + shellQuote(v)
			}
		}
	}
	if api.File == nil {
		return []code{newCode("snippet-cli", "Command-line client", "", cmd)}
	}
	return []code{
		newCode("snippet-cli", "Command-line client, uploading a file", "Run it where "+exampleFile+" is.", cmd+" --file "+exampleFile),
		newCode("snippet-cli-url", "Command-line client, with the file's address", "", cmd+" --url "+shellQuote(exampleFileURL)),
	}
}

// textValues returns a value as a query string or a command line gives it: an array as
// its elements (the option repeated), an object as JSON text, a number without
// exponent.
func textValues(v any) []string {
	switch v := v.(type) {
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			out = append(out, textValue(e))
		}
		return out
	}
	return []string{textValue(v)}
}

func textValue(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case bool:
		return strconv.FormatBool(v)
	}
	return paramdoc.Value(v)
}

// jsonObject writes the arguments as a JSON object, in their order.
func jsonObject(args []clientgen.Arg) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		k, _ := json.Marshal(a.Name)
		v, err := json.Marshal(a.Value)
		if err != nil { // example values are JSON values
			v = []byte("null")
		}
		fmt.Fprintf(&b, "%s: %s", k, v)
	}
	b.WriteByte('}')
	return b.String()
}
