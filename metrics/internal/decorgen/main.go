// Command decorgen writes metrics/decorators_gen.go: the parts of the metrics' store
// decorators, one per store interface, each forwarding every method of its interface
// with the operation timed, and the functions that put a decorator together from the
// parts of the interfaces the store it decorates has. Run it from the metrics
// directory (go generate does):
//
//	go run ./internal/decorgen
//
// A decorator's type must have exactly the interfaces of its store, so that what a
// type assertion finds on it is what it would find on the store (the service looks for
// a driver.Admitter, a driver.KeyChecker, a driver.Sweeper; credit blocks a
// driver.Roller; the webhooks for an
// auth.KeyExpiries; the readiness check for a health.Pinger). Go makes a type per set
// of methods, so the decorator of a store is one of the types written here: for each
// family (a role, or the whole store that plays every role of the call), one type per
// set of the family's optional interfaces whose methods can be on one type (an
// idempotency.Store's Claim and a journal.Store's cannot). The interfaces and the
// families are the lists below; the parts' methods are read from the interfaces
// themselves, by reflection, so that a method added to an interface is forwarded once
// this runs again (and the package does not compile until it does). TestGenerated
// checks that the file is what this writes.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/webhook"
)

// An iface is a store interface a decorator forwards.
type iface struct {
	t reflect.Type
	// prefix begins the names of its operations (the values of the label
	// "operation"), which are its methods in snake case: it tells apart the methods of
	// the same name of several interfaces (Claim, Prune, ...). The interfaces of the
	// call's stores have none, and neither have the idempotency and session stores'.
	prefix string
}

// interfaces are the store interfaces (store/store.go lists them), in the order of
// the generated code.
var interfaces = []iface{
	{t: reflect.TypeFor[auth.KeyStore]()},
	{t: reflect.TypeFor[auth.KeyExpiries]()},
	{t: reflect.TypeFor[driver.KeyChecker]()},
	{t: reflect.TypeFor[driver.Ledger]()},
	{t: reflect.TypeFor[driver.Sweeper]()},
	{t: reflect.TypeFor[driver.RateLimiter]()},
	{t: reflect.TypeFor[driver.ConcurrencyLimiter]()},
	{t: reflect.TypeFor[driver.Admitter]()},
	{t: reflect.TypeFor[driver.Roller]()},
	{t: reflect.TypeFor[auth.SessionStore]()},
	{t: reflect.TypeFor[idempotency.Store]()},
	{t: reflect.TypeFor[journal.Store](), prefix: "journal_"},
	{t: reflect.TypeFor[audit.Store](), prefix: "audit_"},
	{t: reflect.TypeFor[usage.Store](), prefix: "usage_"},
	{t: reflect.TypeFor[webhook.Store](), prefix: "webhook_"},
	{t: reflect.TypeFor[oauthstore.Store](), prefix: "oauth_"},
	{t: reflect.TypeFor[health.Pinger]()},
}

// A family is a kind of decorator: the interfaces the store it decorates must have,
// and those it forwards when the store has them.
type family struct {
	name     string // the function is wrap+name
	doc      string
	required []reflect.Type
	optional []reflect.Type
}

var (
	keyStore    = reflect.TypeFor[auth.KeyStore]()
	expiries    = reflect.TypeFor[auth.KeyExpiries]()
	checker     = reflect.TypeFor[driver.KeyChecker]()
	ledger      = reflect.TypeFor[driver.Ledger]()
	sweeper     = reflect.TypeFor[driver.Sweeper]()
	rates       = reflect.TypeFor[driver.RateLimiter]()
	slots       = reflect.TypeFor[driver.ConcurrencyLimiter]()
	admitter    = reflect.TypeFor[driver.Admitter]()
	roller      = reflect.TypeFor[driver.Roller]()
	sessions    = reflect.TypeFor[auth.SessionStore]()
	idem        = reflect.TypeFor[idempotency.Store]()
	journalT    = reflect.TypeFor[journal.Store]()
	auditT      = reflect.TypeFor[audit.Store]()
	usageT      = reflect.TypeFor[usage.Store]()
	webhookT    = reflect.TypeFor[webhook.Store]()
	oauthT      = reflect.TypeFor[oauthstore.Store]()
	pinger      = reflect.TypeFor[health.Pinger]()
	justPinging = []reflect.Type{pinger}
)

// families are the decorators, each in one role but the whole store's.
var families = []family{
	{"Whole", "a whole store, which plays every role of the call",
		[]reflect.Type{keyStore, ledger, rates, slots},
		[]reflect.Type{expiries, checker, sweeper, admitter, roller, journalT, pinger}},
	{"Keys", "a key store", []reflect.Type{keyStore}, []reflect.Type{expiries, checker, journalT, pinger}},
	{"Ledger", "a ledger", []reflect.Type{ledger}, []reflect.Type{sweeper, roller, journalT, pinger}},
	{"Rates", "a rate limiter", []reflect.Type{rates}, justPinging},
	{"Slots", "a concurrency limiter", []reflect.Type{slots}, justPinging},
	{"Sessions", "a session store", []reflect.Type{sessions}, justPinging},
	{"Idempotency", "an idempotency store", []reflect.Type{idem}, justPinging},
	{"Audit", "an audit store", []reflect.Type{auditT}, justPinging},
	{"Usage", "a usage store", []reflect.Type{usageT}, justPinging},
	{"Webhooks", "a webhook store", []reflect.Type{webhookT}, justPinging},
	{"OAuth", "an OAuth store", []reflect.Type{oauthT}, justPinging},
}

func main() {
	out := flag.String("o", "decorators_gen.go", "the file to write")
	flag.Parse()
	src, err := generate()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// A gen writes the file.
type gen struct {
	buf     bytes.Buffer
	imports map[string]string // path to name
}

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.buf, format, args...) }

// comment writes text as a comment, its lines at most 88 characters long.
func (g *gen) comment(text string) {
	line := "//"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 88 && line != "//" {
			g.p("%s\n", line)
			line = "//"
		}
		line += " " + w
	}
	g.p("%s\n", line)
}

// generate returns the source of decorators_gen.go.
func generate() ([]byte, error) {
	g := &gen{imports: map[string]string{}}
	known := map[reflect.Type]bool{}
	for _, in := range interfaces {
		known[in.t] = true
	}
	for _, f := range families {
		for _, t := range append(slices.Clone(f.required), f.optional...) {
			if !known[t] {
				return nil, fmt.Errorf("family %s: %s is not in the list of interfaces", f.name, t)
			}
		}
	}
	var body gen
	body.imports = g.imports
	if err := body.ops(); err != nil {
		return nil, err
	}
	for _, in := range interfaces {
		if err := body.part(in); err != nil {
			return nil, err
		}
	}
	for _, f := range families {
		body.family(f)
	}

	g.p("// Code generated by go run ./internal/decorgen. DO NOT EDIT.\n\npackage metrics\n\nimport (\n")
	paths := make([]string, 0, len(g.imports))
	for path := range g.imports {
		paths = append(paths, path)
	}
	slices.SortFunc(paths, func(a, b string) int {
		// The standard library's first, then a blank line and the others.
		if sa, sb := !strings.Contains(a, "."), !strings.Contains(b, "."); sa != sb {
			if sa {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	for i, path := range paths {
		if i > 0 && !strings.Contains(paths[i-1], ".") && strings.Contains(path, ".") {
			g.p("\n")
		}
		g.p("\t%q\n", path)
	}
	g.p(")\n\n")
	g.buf.Write(body.buf.Bytes())
	src, err := format.Source(g.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the generated code does not parse: %w\n%s", err, g.buf.Bytes())
	}
	return src, nil
}

// ops writes the operations and their names.
func (g *gen) ops() error {
	g.p("// The operations of the stores, one per method of each interface.\nconst (\n")
	seen := map[string]string{}
	first := true
	for _, in := range interfaces {
		for i := range in.t.NumMethod() {
			m := in.t.Method(i)
			name := in.prefix + snake(m.Name)
			if other, ok := seen[name]; ok {
				return fmt.Errorf("the operation %q is %s's and %s's: give one of the interfaces a prefix", name, other, in.t)
			}
			seen[name] = in.t.String() + "." + m.Name
			if first {
				g.p("\t%s op = iota\n", opConst(in, m.Name))
				first = false
			} else {
				g.p("\t%s\n", opConst(in, m.Name))
			}
		}
	}
	g.p("\tnumOps\n)\n\n")
	g.p("// opNames are the values of the operation label.\nvar opNames = [numOps]string{\n")
	for _, in := range interfaces {
		for i := range in.t.NumMethod() {
			m := in.t.Method(i)
			g.p("\t%s: %q,\n", opConst(in, m.Name), in.prefix+snake(m.Name))
		}
	}
	g.p("}\n\n")
	return nil
}

// part writes the part that forwards in.
func (g *gen) part(in iface) error {
	name := partName(in.t)
	q := g.typeName(in.t)
	g.p("// %s forwards %s.\ntype %s struct {\n\tops *opSeries\n\ts   %s\n}\n\n", name, q, name, q)
	g.p("var _ %s = (*%s)(nil)\n\n", q, name)
	for i := range in.t.NumMethod() {
		m := in.t.Method(i)
		ft := m.Type
		if ft.NumOut() == 0 || ft.Out(ft.NumOut()-1) != reflect.TypeFor[error]() {
			return fmt.Errorf("%s.%s does not return an error last: a decorator counts failures by it", in.t, m.Name)
		}
		var params, args []string
		for j := range ft.NumIn() {
			t := ft.In(j)
			arg := fmt.Sprintf("a%d", j)
			if t == reflect.TypeFor[context.Context]() {
				arg = "ctx"
			}
			if ft.IsVariadic() && j == ft.NumIn()-1 {
				params = append(params, arg+" ..."+g.typeName(t.Elem()))
				args = append(args, arg+"...")
				continue
			}
			params = append(params, arg+" "+g.typeName(t))
			args = append(args, arg)
		}
		var results, rets []string
		for j := range ft.NumOut() {
			results = append(results, g.typeName(ft.Out(j)))
			if j == ft.NumOut()-1 {
				rets = append(rets, "err")
			} else {
				rets = append(rets, fmt.Sprintf("r%d", j))
			}
		}
		// A method of several results names them, so that the store's results land in
		// the decorator's own rather than in locals copied into them (a key and its
		// account, for Resolve, are a few hundred bytes).
		res, assign, ret := results[0], ":=", " err"
		if len(results) > 1 {
			named := make([]string, len(results))
			for j := range results {
				named[j] = rets[j] + " " + results[j]
			}
			res, assign, ret = "("+strings.Join(named, ", ")+")", "=", ""
		}
		g.p("func (p *%s) %s(%s) %s {\n", name, m.Name, strings.Join(params, ", "), res)
		g.p("\tt := p.ops.start()\n")
		g.p("\t%s %s p.s.%s(%s)\n", strings.Join(rets, ", "), assign, m.Name, strings.Join(args, ", "))
		g.p("\tp.ops.done(%s, t, err)\n", opConst(in, m.Name))
		g.p("\treturn%s\n}\n\n", ret)
	}
	return nil
}

// family writes the function that decorates a store of f.
func (g *gen) family(f family) {
	var names []string
	for _, t := range f.optional {
		names = append(names, g.typeName(t))
	}
	var req []string
	for _, t := range f.required {
		req = append(req, g.typeName(t))
	}
	g.comment(fmt.Sprintf("wrap%s decorates %s (%s), with those of %s that it has, and no other.",
		f.name, f.doc, strings.Join(req, ", "), strings.Join(names, ", ")))
	g.p("func wrap%s(ops *opSeries, s any) any {\n", f.name)
	for i, t := range f.required {
		g.p("\tr%d := %s{ops, s.(%s)}\n", i, partName(t), g.typeName(t))
	}
	g.p("\tvar mask uint\n")
	for i, t := range f.optional {
		g.p("\tvar o%d %s\n", i, partName(t))
		g.p("\tif x, ok := s.(%s); ok {\n\t\to%d, mask = %s{ops, x}, mask|1<<%d\n\t}\n", g.typeName(t), i, partName(t), i)
	}
	g.p("\tu := unwrapper{inner: s}\n\tswitch mask {\n")
	// The types are named (a decorator's methods are named after its type): keys5 is
	// the key store's decorator with the optional interfaces of the bits of 5.
	var decls gen
	for mask := range 1 << len(f.optional) {
		types := []reflect.Type{}
		fields := []string{"unwrapper"}
		values := []string{"u"}
		types = append(types, f.required...)
		for i, t := range f.required {
			fields = append(fields, partName(t))
			values = append(values, fmt.Sprintf("r%d", i))
		}
		for i, t := range f.optional {
			if mask&(1<<i) != 0 {
				types = append(types, t)
				fields = append(fields, partName(t))
				values = append(values, fmt.Sprintf("o%d", i))
			}
		}
		if conflict(types) {
			continue // no type has both methods
		}
		typ := fmt.Sprintf("%s%d", strings.ToLower(f.name[:1])+f.name[1:], mask)
		g.p("\tcase %#b:\n\t\treturn &%s{%s}\n", mask, typ, strings.Join(values, ", "))
		decls.p("type %s struct {\n", typ)
		for _, fl := range fields {
			decls.p("\t%s\n", fl)
		}
		decls.p("}\n\n")
	}
	g.p("\t}\n\tpanic(\"metrics: a store has methods of the same name in two interfaces\")\n}\n\n")
	g.buf.Write(decls.buf.Bytes())
}

// conflict reports whether two of the interfaces have a method of the same name.
func conflict(ts []reflect.Type) bool {
	seen := map[string]bool{}
	for _, t := range ts {
		for i := range t.NumMethod() {
			n := t.Method(i).Name
			if seen[n] {
				return true
			}
			seen[n] = true
		}
	}
	return false
}

// partName is the name of the part that forwards t: authKeyStorePart, say.
func partName(t reflect.Type) string {
	pkg := t.String()[:strings.IndexByte(t.String(), '.')]
	return pkg + t.Name() + "Part"
}

// opConst is the name of the constant of the operation of in's method.
func opConst(in iface, method string) string {
	return "op" + camel(in.prefix) + method
}

// typeName returns how the generated code spells t, importing the packages it names.
func (g *gen) typeName(t reflect.Type) string {
	g.imported(t)
	if t == reflect.TypeFor[[]byte]() {
		return "[]byte"
	}
	return t.String()
}

// imported imports the packages of the named types t is made of.
func (g *gen) imported(t reflect.Type) {
	if t.Name() != "" {
		if t.PkgPath() != "" {
			name := strings.TrimSuffix(t.String(), "."+t.Name())
			if old, ok := g.imports[t.PkgPath()]; ok && old != name {
				panic("two names for " + t.PkgPath())
			}
			g.imports[t.PkgPath()] = name
		}
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Pointer, reflect.Chan:
		g.imported(t.Elem())
	case reflect.Map:
		g.imported(t.Key())
		g.imported(t.Elem())
	case reflect.Func:
		for i := range t.NumIn() {
			g.imported(t.In(i))
		}
		for i := range t.NumOut() {
			g.imported(t.Out(i))
		}
	case reflect.Struct:
		for i := range t.NumField() {
			g.imported(t.Field(i).Type)
		}
	}
}

// snake returns a method's name in snake case: AllowN is allow_n, InUse in_use.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// camel returns a prefix ("journal_") in camel case ("Journal").
func camel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
