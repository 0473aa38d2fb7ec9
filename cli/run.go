package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/internal/paramdoc"
)

// Exit statuses.
const (
	exitOK    = 0
	exitAPI   = 1 // the service refused the call, or could not be reached
	exitUsage = 2 // a usage or validation mistake
)

// usage is the command's help, with the brand's names.
func usage(b brand.Brand) string {
	lines := []struct{ synopsis, what string }{
		{"<api_id> --<name> <value> ...", "call an API (also --name=value)"},
		{"<api_id> --file PATH ...", "call a file API with a local file"},
		{"<api_id> --url URL ...", "call a file API with the file's address"},
		{"<api_id> --batch FILE", "call an API once per line of FILE, a JSON"},
		{"", "object of parameters (- for standard input)"},
		{"<api_id> --help", "show the API's parameters, rules and cost"},
		{"list", "list the APIs of the catalog"},
	}
	width := len(b.Command) + len(" <api_id> --<name> <value> ...")
	var u strings.Builder
	u.WriteString("Usage:\n")
	for _, l := range lines {
		cmd := ""
		if l.synopsis != "" {
			cmd = b.Command + " " + l.synopsis
		}
		fmt.Fprintf(&u, "  %-*s   %s\n", width, cmd, l.what)
	}
	vars := len(b.BaseURLVar())
	fmt.Fprintf(&u, "\nEnvironment:\n  %-*s   the key of your account (required to call an API)\n", vars, b.KeyVar())
	fmt.Fprintf(&u, "  %-*s   the service (default http://localhost:8080)\n", vars, b.BaseURLVar())
	return u.String()
}

// system is what a run of the command reads and writes, besides its arguments.
type system struct {
	getenv         func(string) string // reads the environment
	stdin          io.Reader
	stdout, stderr io.Writer
	// stderrIsTerminal says whether standard error is a terminal: the progress of a
	// batch is drawn there only then.
	stderrIsTerminal bool
	// sleep waits before a batch is retried, or returns ctx's error if ctx ends first;
	// nil means a timer.
	sleep func(ctx context.Context, d time.Duration) error
}

// cli is one run of the command.
type cli struct {
	system
	brand brand.Brand // a valid one
	opts  client.Options
}

// run executes the command of brand b (valid, not zero) with args (without the
// program name) and returns the exit status.
func run(ctx context.Context, b brand.Brand, args []string, sys system) int {
	c := &cli{system: sys, brand: b, opts: client.Options{BaseURL: sys.getenv(b.BaseURLVar()), AuthMode: "cli"}}
	if len(args) == 0 {
		fmt.Fprint(c.stderr, usage(b))
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			return c.apiHelp(ctx, args[1])
		}
		fmt.Fprint(c.stdout, usage(c.brand))
		return exitOK
	case "list":
		if len(args) > 1 {
			return c.usageError("list takes no arguments")
		}
		return c.list(ctx)
	}
	if strings.HasPrefix(args[0], "-") {
		return c.usageError("the first argument is the API id, not %q; `%s list` shows the ids", args[0], c.brand.Command)
	}
	return c.call(ctx, args[0], args[1:])
}

// usageError reports a mistake of the command line and returns exitUsage.
func (c *cli) usageError(format string, args ...any) int {
	fmt.Fprintf(c.stderr, c.brand.Command+": "+format+"\n", args...)
	return exitUsage
}

// failure reports an error that is not the user's mistake and returns exitAPI.
func (c *cli) failure(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.brand.Command, err)
	return exitAPI
}

// list prints the catalog: id, method, cost and title of every API.
func (c *cli) list(ctx context.Context) int {
	apis, err := client.ReadCatalog(ctx, &c.opts)
	if err != nil {
		return c.clientError(err)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "API\tMETHOD\tCOST\tTITLE")
	for _, a := range apis {
		kind := a.Method
		if a.File != nil {
			kind += " (file)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", a.ID, kind, a.Cost, a.Title)
	}
	tw.Flush()
	return exitOK
}

// apiHelp prints the parameters, rules and cost of one API. It needs no key.
func (c *cli) apiHelp(ctx context.Context, id string) int {
	apis, err := client.ReadCatalog(ctx, &c.opts)
	if err != nil {
		return c.clientError(err)
	}
	for _, a := range apis {
		if a.ID == id {
			writeHelp(c.stdout, c.brand.Command, a)
			return exitOK
		}
	}
	return c.usageError("the catalog has no API %q; `%s list` shows them", id, c.brand.Command)
}

// writeHelp writes the help of an API, for the command of that name.
func writeHelp(w io.Writer, command string, a *catalog.API) {
	fmt.Fprintf(w, "%s: %s\n", a.ID, a.Title)
	if a.Description != "" {
		fmt.Fprintf(w, "%s\n", a.Description)
	}
	cost := fmt.Sprintf("%d credits", a.Cost)
	switch a.Cost {
	case 0:
		cost = "free, no credits"
	case 1:
		cost = "1 credit"
	}
	fmt.Fprintf(w, "\nCost: %s per call (%s /v1/%s).\n", cost, a.Method, a.ID)
	synopsis := []string{command, a.ID}
	if a.File != nil {
		synopsis = append(synopsis, "(--file PATH | --url URL)")
	}
	for i := range a.Params {
		p := &a.Params[i]
		s := "--" + p.Name + " " + strings.ToUpper(paramdoc.Type(p))
		if p.Type == catalog.Boolean {
			s = "--" + p.Name + "[=true|false]"
		}
		if !p.Required {
			s = "[" + s + "]"
		}
		synopsis = append(synopsis, s)
	}
	fmt.Fprintf(w, "Usage: %s\n", strings.Join(synopsis, " "))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if a.File != nil {
		fmt.Fprintf(tw, "\nFile:\n")
		fmt.Fprintf(tw, "  --file PATH\t%s: %s, at most %s (also --%s PATH)\n", a.File.Name, strings.Join(a.File.Types, ", "), paramdoc.Bytes(a.File.MaxBytes), a.File.Name)
		fmt.Fprintf(tw, "  --url URL\tthe file's address, which the service fetches\n")
	}
	if len(a.Params) > 0 {
		fmt.Fprintf(tw, "\nParameters:\n")
	}
	for i := range a.Params {
		p := &a.Params[i]
		line := "  --" + p.Name + "\t" + paramdoc.Type(p)
		if r := paramdoc.Rules(p); r != "" {
			line += "; " + r
		}
		if p.Description != "" {
			line += ". " + p.Description
		}
		if p.Example != nil {
			line += " Example: " + paramdoc.Value(p.Example)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// call calls an API with the options of the command line.
func (c *cli) call(ctx context.Context, id string, args []string) int {
	for _, a := range args {
		if a == "--help" || a == "-h" || a == "-help" {
			return c.apiHelp(ctx, id)
		}
	}
	file, isBatch, err := batchFile(args)
	switch {
	case err != nil:
		return c.usageError("%v", err)
	case isBatch:
		return c.batch(ctx, id, file)
	}
	cl, api, code := c.connect(ctx, id)
	if cl == nil {
		return code
	}
	in, err := parseArgs(api, args)
	if err != nil {
		return c.usageError("%v\n(`%s %s --help` shows its parameters)", err, c.brand.Command, id)
	}
	typed, err := api.ValidateQuery(in.values)
	if err != nil {
		return c.usageError("%s: %v", id, err)
	}
	params := make(map[string]any, len(in.values))
	for name := range in.values {
		params[name] = typed[name]
	}
	var resp *client.Response
	switch {
	case in.file != "":
		resp, err = cl.ExecuteWithFile(ctx, id, in.file, params)
	case in.url != "":
		resp, err = cl.ExecuteWithURL(ctx, id, in.url, params)
	default:
		resp, err = cl.Execute(ctx, id, params)
	}
	if err != nil {
		return c.clientError(err)
	}
	c.printBody(resp.Body)
	return exitOK
}

// connect returns the client of a call of the API id, with the key of the
// environment, and the API's definition; or nil and the exit status of what went
// wrong.
func (c *cli) connect(ctx context.Context, id string) (*client.Client, *catalog.API, int) {
	envKey := c.brand.KeyVar()
	key := c.getenv(envKey)
	if strings.TrimSpace(key) == "" {
		return nil, nil, c.usageError("%s is not set: export the key of your account, as in\n  export %s=<your key>\n(`%s %s --help` works without it)", envKey, envKey, c.brand.Command, id)
	}
	cl, err := client.New(key, &c.opts)
	if err != nil {
		return nil, nil, c.usageError("%s", strings.TrimPrefix(err.Error(), "client: "))
	}
	api, err := cl.API(ctx, id)
	if err != nil {
		return nil, nil, c.clientError(err)
	}
	return cl, api, exitOK
}

// clientError reports an error of the client package with the right exit status, and
// prints the envelope of an error answer.
func (c *cli) clientError(err error) int {
	var (
		ve     *client.ValidationError
		apiErr *client.APIError
		catErr *client.CatalogError
	)
	switch {
	case errors.As(err, &catErr):
		return c.failure(fmt.Errorf("cannot read the catalog at %s: %v; is the service running there? Set %s to its address", catErr.URL, catErr.Err, c.brand.BaseURLVar()))
	case errors.As(err, &ve):
		return c.usageError("%s", strings.TrimPrefix(err.Error(), "client: "))
	case errors.Is(err, client.ErrUnknownAPI):
		return c.usageError("%s, and so does `%s list`", strings.TrimPrefix(err.Error(), "client: "), c.brand.Command)
	case errors.As(err, &apiErr):
		if apiErr.Envelope.Status != "" {
			c.printBody(apiErr.Body)
		}
		msg := fmt.Sprintf("the service answered %d", apiErr.StatusCode)
		if apiErr.Code != "" {
			msg += " (" + apiErr.Code + ")"
		}
		fmt.Fprintf(c.stderr, "%s: %s: %s\n", c.brand.Command, msg, apiErr.Message)
		if apiErr.StatusCode == 401 {
			fmt.Fprintf(c.stderr, "%s: the key in %s is not a key of this service (%s); check the key and %s\n", c.brand.Command, c.brand.KeyVar(), c.baseURL(), c.brand.BaseURLVar())
		}
		return exitAPI
	}
	return c.failure(errors.New(strings.TrimPrefix(err.Error(), "client: ")))
}

func (c *cli) baseURL() string {
	if c.opts.BaseURL == "" {
		return client.DefaultBaseURL
	}
	return c.opts.BaseURL
}

// printBody prints an envelope as received, ending the line.
func (c *cli) printBody(b []byte) {
	c.stdout.Write(b)
	if len(b) == 0 || b[len(b)-1] != '\n' {
		io.WriteString(c.stdout, "\n")
	}
}

// batchFile returns the file of a batch run (--batch FILE or --batch=FILE), and
// whether the arguments ask for one; a batch run takes no other option.
func batchFile(args []string) (string, bool, error) {
	for i, a := range args {
		var file string
		switch {
		case a == "--batch" && i+1 < len(args):
			file = args[i+1]
		case a == "--batch":
			return "", false, errors.New("--batch needs a file: the path of a JSON Lines file, or - for standard input")
		case strings.HasPrefix(a, "--batch="):
			file = strings.TrimPrefix(a, "--batch=")
		default:
			continue
		}
		if len(args) > 2 || (len(args) == 2 && a != "--batch") {
			return "", false, errors.New("--batch takes no other option: each line of the file gives the parameters of one call, as a JSON object")
		}
		if file == "" {
			return "", false, errors.New("--batch needs a file: the path of a JSON Lines file, or - for standard input")
		}
		return file, true, nil
	}
	return "", false, nil
}

// input is what the options of a call give.
type input struct {
	values    url.Values // the parameters, as text
	file, url string     // the file of a file API
}

// parseArgs reads --name value and --name=value options against the API's parameters.
func parseArgs(api *catalog.API, args []string) (input, error) {
	in := input{values: url.Values{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") || len(a) == 2 {
			return in, fmt.Errorf("unexpected argument %q: give parameters as --name value", a)
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		p := param(api, name)
		isFile := api.File != nil && (name == "file" || name == api.File.Name || name == catalog.URLParam)
		if p == nil && !isFile {
			return in, fmt.Errorf("the %s API has no parameter --%s; it takes %s", api.ID, name, optionList(api))
		}
		if !hasValue {
			switch {
			case i+1 < len(args) && !strings.HasPrefix(args[i+1], "--"):
				i++
				value = args[i]
			case p != nil && p.Type == catalog.Boolean:
				value = "true"
			default:
				return in, fmt.Errorf("--%s needs a value", name)
			}
		}
		switch {
		case isFile && name == catalog.URLParam:
			if in.url != "" {
				return in, errors.New("--url is given twice")
			}
			in.url = value
		case isFile:
			if in.file != "" {
				return in, fmt.Errorf("--%s is given twice", name)
			}
			in.file = value
		default:
			in.values.Add(name, value)
		}
	}
	if api.File != nil {
		switch {
		case in.file != "" && in.url != "":
			return in, errors.New("give either --file or --url, not both")
		case in.file == "" && in.url == "":
			return in, fmt.Errorf("the %s API needs a file: give --file PATH (a local file) or --url URL (its address)", api.ID)
		}
	}
	return in, nil
}

func param(api *catalog.API, name string) *catalog.Param {
	for i := range api.Params {
		if api.Params[i].Name == name {
			return &api.Params[i]
		}
	}
	return nil
}

// optionList names the options an API takes: "--text, --algorithm".
func optionList(api *catalog.API) string {
	var names []string
	if api.File != nil {
		names = append(names, "--file", "--url")
	}
	for _, p := range api.Params {
		names = append(names, "--"+p.Name)
	}
	if len(names) == 0 {
		return "no parameters"
	}
	return strings.Join(names, ", ")
}
