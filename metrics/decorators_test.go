package metrics_test

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/webhook"
)

// storeInterfaces are the store interfaces, by the names store/store.go lists them
// under (TestStoreInterfacesListed keeps them the same).
var storeInterfaces = map[string]reflect.Type{
	"auth.KeyStore":             reflect.TypeFor[auth.KeyStore](),
	"auth.KeyExpiries":          reflect.TypeFor[auth.KeyExpiries](),
	"auth.SessionStore":         reflect.TypeFor[auth.SessionStore](),
	"driver.KeyChecker":         reflect.TypeFor[driver.KeyChecker](),
	"driver.Ledger":             reflect.TypeFor[driver.Ledger](),
	"driver.Sweeper":            reflect.TypeFor[driver.Sweeper](),
	"driver.RateLimiter":        reflect.TypeFor[driver.RateLimiter](),
	"driver.ConcurrencyLimiter": reflect.TypeFor[driver.ConcurrencyLimiter](),
	"driver.Admitter":           reflect.TypeFor[driver.Admitter](),
	"driver.Roller":             reflect.TypeFor[driver.Roller](),
	"audit.Store":               reflect.TypeFor[audit.Store](),
	"usage.Store":               reflect.TypeFor[usage.Store](),
	"idempotency.Store":         reflect.TypeFor[idempotency.Store](),
	"oauthstore.Store":          reflect.TypeFor[oauthstore.Store](),
	"webhook.Store":             reflect.TypeFor[webhook.Store](),
	"journal.Store":             reflect.TypeFor[journal.Store](),
	"journal.KeyStore":          reflect.TypeFor[journal.KeyStore](),
	"journal.Ledger":            reflect.TypeFor[journal.Ledger](),
	"health.Pinger":             reflect.TypeFor[health.Pinger](),
}

// roleInterfaces are the store interfaces that a store is given in a role of its own,
// and decorated in it (by Stores, SessionStore, AuditStore, ...); the others are what
// a store offers beside its roles (auth.KeyExpiries, driver.Admitter, health.Pinger,
// ...), which its decorators forward.
var roleInterfaces = []string{"auth.KeyStore", "driver.Ledger", "driver.RateLimiter", "driver.ConcurrencyLimiter",
	"auth.SessionStore", "idempotency.Store", "audit.Store", "usage.Store", "webhook.Store", "oauthstore.Store"}

// TestStoreInterfacesListed checks that storeInterfaces are the interfaces the index
// of store/store.go lists (store's TestIndexOfInterfaces checks that it lists every
// interface of the packages of the stores' contracts).
func TestStoreInterfacesListed(t *testing.T) {
	doc, err := os.ReadFile("../store/store.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start, end := strings.Index(text, "# The store interfaces"), strings.Index(text, "# Error contract")
	if start < 0 || end < start {
		t.Fatal("store/store.go has no section \"The store interfaces\" before \"Error contract\"")
	}
	pkgs := map[string]bool{}
	for name := range storeInterfaces {
		pkgs[name[:strings.IndexByte(name, '.')]] = true
	}
	listed := map[string]bool{}
	for _, name := range regexp.MustCompile(`\b([a-z]+)\.([A-Z][A-Za-z]*)\b`).FindAllString(text[start:end], -1) {
		if pkgs[name[:strings.IndexByte(name, '.')]] && name != "driver.Wrapper" {
			listed[name] = true
		}
	}
	for name := range listed {
		if storeInterfaces[name] == nil {
			t.Errorf("store/store.go lists %s, which storeInterfaces does not have: add it (and see that the decorators forward it)", name)
		}
	}
	for name := range storeInterfaces {
		if !listed[name] {
			t.Errorf("storeInterfaces has %s, which store/store.go does not list", name)
		}
	}
}

// interfacesOf returns the names of the store interfaces s implements, sorted.
func interfacesOf(s any) []string {
	var names []string
	for name, it := range storeInterfaces {
		if reflect.TypeOf(s).Implements(it) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// decorations returns the decorators of s in every role it plays, with the roles of
// each: one in every role of the call for a whole store (keys, ledger, rates and
// slots), else one per role.
func decorations(m *metrics.Metrics, s any) map[string]any {
	out := map[string]any{}
	_, k := s.(auth.KeyStore)
	_, l := s.(driver.Ledger)
	_, r := s.(driver.RateLimiter)
	_, c := s.(driver.ConcurrencyLimiter)
	if k && l && r && c {
		st := m.Stores(tollgate.Stores{Keys: s.(auth.KeyStore), Ledger: s.(driver.Ledger),
			Rates: s.(driver.RateLimiter), Slots: s.(driver.ConcurrencyLimiter)})
		out["auth.KeyStore driver.ConcurrencyLimiter driver.Ledger driver.RateLimiter"] = st.Keys
	} else {
		if k {
			out["auth.KeyStore"] = m.Stores(tollgate.Stores{Keys: s.(auth.KeyStore)}).Keys
		}
		if l {
			out["driver.Ledger"] = m.Stores(tollgate.Stores{Ledger: s.(driver.Ledger)}).Ledger
		}
		if r {
			out["driver.RateLimiter"] = m.Stores(tollgate.Stores{Rates: s.(driver.RateLimiter)}).Rates
		}
		if c {
			out["driver.ConcurrencyLimiter"] = m.Stores(tollgate.Stores{Slots: s.(driver.ConcurrencyLimiter)}).Slots
		}
	}
	decorateAs(out, "auth.SessionStore", s, m.SessionStore)
	decorateAs(out, "idempotency.Store", s, m.IdempotencyStore)
	decorateAs(out, "audit.Store", s, m.AuditStore)
	decorateAs(out, "usage.Store", s, m.UsageStore)
	decorateAs(out, "webhook.Store", s, m.WebhookStore)
	decorateAs(out, "oauthstore.Store", s, m.OAuthStore)
	return out
}

// decorateAs sets out[role] to s decorated as an I, if s is one.
func decorateAs[I any](out map[string]any, role string, s any, decorate func(I) I) {
	if x, ok := s.(I); ok {
		out[role] = decorate(x)
	}
}

// TestDecoratorsForwardEveryInterface checks, for every store of this module, that its
// decorators forward every store interface it has and no other: each decorator has
// exactly the roles it was made for, every interface of the store that is not a role
// (auth.KeyExpiries, driver.Admitter, journal.Store, health.Pinger, ...) is on a
// decorator, health.Pinger on every one, and a decorator has no interface the store
// has not. TestStoreTypesCovered checks that the stores are every store of the module.
func TestDecoratorsForwardEveryInterface(t *testing.T) {
	for _, tc := range storeTypes(t) {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newMetrics(t, nil)
			s := tc.new(t)
			has := interfacesOf(s)
			if len(has) == 0 {
				t.Fatalf("%T has none of the store interfaces", s)
			}
			decs := decorations(m, s)
			forwarded := map[string]bool{}
			for roles, d := range decs {
				got := interfacesOf(d)
				for _, name := range got {
					forwarded[name] = true
					if !slices.Contains(has, name) {
						t.Errorf("the decorator in %s implements %s, which %T does not", roles, name, s)
					}
				}
				for _, role := range roleInterfaces {
					if want := slices.Contains(strings.Fields(roles), role); slices.Contains(got, role) != want {
						t.Errorf("the decorator in %s implements %s: %v, want %v", roles, role, !want, want)
					}
				}
				if slices.Contains(has, "health.Pinger") && !slices.Contains(got, "health.Pinger") {
					t.Errorf("the decorator in %s is no health.Pinger", roles)
				}
				if w, ok := d.(driver.Wrapper); !ok || w.Unwrap() != s {
					t.Errorf("the decorator in %s does not unwrap to the store", roles)
				}
			}
			for _, name := range has {
				if !forwarded[name] {
					t.Errorf("%T implements %s, which none of its decorators does", s, name)
				}
			}
		})
	}
}

// A storeType makes a store of the module.
type storeType struct {
	name string // package.Type
	new  func(t *testing.T) any
}

// storeTypes are the stores of the module: every type of store/memory, and of
// store/postgres and store/redis when their servers are given.
func storeTypes(t *testing.T) []storeType {
	sts := []storeType{
		{"memory.KeyStore", func(*testing.T) any { return memory.NewKeyStore() }},
		{"memory.Ledger", func(*testing.T) any { return memory.NewLedger(nil) }},
		{"memory.RateLimiter", func(*testing.T) any { return memory.NewRateLimiter() }},
		{"memory.ConcurrencyLimiter", func(*testing.T) any { return memory.NewConcurrencyLimiter() }},
		{"memory.SessionStore", func(*testing.T) any { return memory.NewSessionStore() }},
		{"memory.IdempotencyStore", func(*testing.T) any { return memory.NewIdempotencyStore(nil) }},
		{"memory.AuditStore", func(*testing.T) any { return memory.NewAuditStore() }},
		{"memory.UsageStore", func(*testing.T) any { return memory.NewUsageStore() }},
		{"memory.WebhookStore", func(*testing.T) any { return memory.NewWebhookStore() }},
		{"memory.OAuthStore", func(*testing.T) any { return memory.NewOAuthStore() }},
	}
	pg := func(f func(postgres.DB) (any, error)) func(t *testing.T) any {
		return func(t *testing.T) any {
			dsn := testenv.Var(t, testenv.Postgres)
			s, err := f(testenv.PostgresPool(t, dsn, testenv.PostgresSchema(t, dsn), 2))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	sts = append(sts,
		storeType{"postgres.Store", pg(func(db postgres.DB) (any, error) { return postgres.New(db, nil) })},
		storeType{"postgres.SessionStore", pg(func(db postgres.DB) (any, error) { return postgres.NewSessionStore(db) })},
		storeType{"postgres.IdempotencyStore", pg(func(db postgres.DB) (any, error) { return postgres.NewIdempotencyStore(db) })},
		storeType{"postgres.AuditStore", pg(func(db postgres.DB) (any, error) { return postgres.NewAuditStore(db) })},
		storeType{"postgres.UsageStore", pg(func(db postgres.DB) (any, error) { return postgres.NewUsageStore(db) })},
		storeType{"postgres.WebhookStore", pg(func(db postgres.DB) (any, error) { return postgres.NewWebhookStore(db, nil) })},
		storeType{"postgres.OAuthStore", pg(func(db postgres.DB) (any, error) { return postgres.NewOAuthStore(db) })},
		storeType{"redis.Store", func(t *testing.T) any { return newRedisStore(t) }},
		storeType{"redis.WebhookStore", func(t *testing.T) any {
			c := testenv.RedisClient(t, testenv.Var(t, testenv.Redis))
			s, err := redis.NewWebhookStore(c, &redis.WebhookOptions{Prefix: testenv.RedisPrefix(t, c)})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	)
	return sts
}

// TestStoreTypesCovered checks that storeTypes has every store of the module: each
// type that the packages of the stores guard as a health.Pinger (every store of this
// module answers it: see store/store.go).
func TestStoreTypesCovered(t *testing.T) {
	var names []string
	for _, st := range storeTypes(t) {
		names = append(names, st.name)
	}
	for _, pkg := range []string{"memory", "postgres", "redis"} {
		f, err := parser.ParseFile(gotoken.NewFileSet(), "../store/"+pkg+"/ping.go", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Values) != 1 {
				return true
			}
			// _ health.Pinger = (*Type)(nil)
			call, ok := vs.Values[0].(*ast.CallExpr)
			if !ok {
				return true
			}
			paren, ok := call.Fun.(*ast.ParenExpr)
			if !ok {
				return true
			}
			star, ok := paren.X.(*ast.StarExpr)
			if !ok {
				return true
			}
			if id, ok := star.X.(*ast.Ident); ok {
				found++
				if name := pkg + "." + id.Name; !slices.Contains(names, name) {
					t.Errorf("%s is a store (store/%s/ping.go) that storeTypes does not have", name, pkg)
				}
			}
			return true
		})
		if found == 0 {
			t.Errorf("store/%s/ping.go guards no store as a health.Pinger", pkg)
		}
	}
}
