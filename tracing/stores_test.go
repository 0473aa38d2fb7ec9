package tracing_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/tracing"
)

// TestStoreRoundTrips: on PostgreSQL (keys, ledger) and Redis (limits), with the
// stores' hooks given the tracer, each round trip of a call is a client span, the
// child of the phase that made it; none holds the key's value.
func TestStoreRoundTrips(t *testing.T) {
	dsn := testenv.Var(t, testenv.Postgres)
	addr := testenv.Var(t, testenv.Redis)
	s := newServerOn(t, nil, func(t *testing.T, tr *tracing.Tracer) tollgate.Stores {
		pool := testenv.PostgresPool(t, dsn, testenv.PostgresSchema(t, dsn), 8, func(cfg *pgxpool.Config) {
			cfg.ConnConfig.Tracer = postgres.QueryTracer(tr)
		})
		if err := postgres.Migrate(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
		pg, err := postgres.New(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		client := testenv.RedisClient(t, addr)
		client.AddHook(redis.Hook(tr))
		rd, err := redis.New(client, &redis.Options{Prefix: testenv.RedisPrefix(t, client)})
		if err != nil {
			t.Fatal(err)
		}
		return tollgate.Stores{Keys: pg, Ledger: pg, Rates: rd, Slots: rd}
	})
	s.spans.Reset() // the account's creation made its round trips outside any span
	if status, body := s.do(t, http.MethodGet, "/v1/alone?text=hi", ""); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	tr := s.tree(t)
	tr.wantRequest("GET /v1/{api_id}", "/v1/{api_id}", 200)
	// A round trip made within another (a statement's preparation, the commands
	// that set up a new connection) is the child of the other; its phase is the
	// first ancestor that is not a round trip.
	parents, phases := map[trace.SpanID]trace.SpanID{}, map[trace.SpanID]string{}
	for _, sp := range tr.spans {
		if sp.SpanKind == trace.SpanKindClient {
			parents[sp.SpanContext.SpanID()] = sp.Parent.SpanID()
		} else {
			phases[sp.SpanContext.SpanID()] = sp.Name
		}
	}
	phaseOf := func(id trace.SpanID) (string, bool) {
		for range len(parents) + 1 {
			if name, ok := phases[id]; ok {
				return name, true
			}
			if id = parents[id]; !id.IsValid() {
				break
			}
		}
		return "", false
	}
	systems := map[string][]string{} // the stores each phase reached
	for _, sp := range tr.spans {
		if sp.SpanKind != trace.SpanKindClient {
			continue
		}
		system, ok := attr(sp, "db.system.name")
		if !ok {
			t.Errorf("store span %q has no db.system.name", sp.Name)
			continue
		}
		if _, ok := attr(sp, "db.operation.name"); !ok {
			t.Errorf("store span %q has no db.operation.name", sp.Name)
		}
		if system.AsString() == "postgresql" {
			if _, ok := attr(sp, "db.query.text"); !ok {
				t.Errorf("PostgreSQL span %q has no db.query.text", sp.Name)
			}
		}
		phase, ok := phaseOf(sp.Parent.SpanID())
		if !ok {
			t.Errorf("store span %q is not within a phase", sp.Name)
			continue
		}
		if !slices.Contains(systems[phase], system.AsString()) {
			systems[phase] = append(systems[phase], system.AsString())
		}
	}
	for phase, want := range map[string][]string{
		"tollgate.authenticate": {"postgresql"},
		"tollgate.admit":        {"postgresql", "redis"},
		"tollgate.settle":       {"postgresql", "redis"},
	} {
		got := slices.Sorted(slices.Values(systems[phase]))
		if !slices.Equal(got, want) {
			t.Errorf("%s reached %v, want %v; spans %v", phase, got, want, names(tr.spans))
		}
	}
	tr.wantNoSecrets(true)
}
