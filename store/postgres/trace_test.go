package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/phasetest"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

func TestOperation(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT 1":                                "SELECT",
		"\n\t\tselect k.id FROM keys":             "SELECT",
		"WITH x AS (SELECT 1) SELECT * FROM x":    "WITH",
		"-- a comment\nINSERT INTO t VALUES ($1)": "INSERT",
		"/* hint */ update t SET a = 1":           "UPDATE",
		"(SELECT 1) UNION (SELECT 2)":             "SELECT",
		"begin":                                   "BEGIN",
		"":                                        "",
		"$1":                                      "",
	} {
		if got := postgres.Operation(sql); got != want {
			t.Errorf("Operation(%q) = %q, want %q", sql, got, want)
		}
	}
}

// TestQueryTracer: with the tracer on a pool's connections, each round trip is a
// phase begun under the context of the work that made it, with its statement but none
// of its arguments, ended with the server's error if it failed.
func TestQueryTracer(t *testing.T) {
	rec := &phasetest.Recorder{}
	pool := newPool(t, 2, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = postgres.QueryTracer(rec) })
	ctx := context.WithValue(context.Background(), phasetest.Key{}, "work")
	rec.Take() // the migration's

	const secret = "a-value-never-told"
	if _, err := pool.Exec(ctx, "SELECT $1::text", secret); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, "SELECT * FROM no_such_table")
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Fatalf("querying a table that does not exist: %v", err)
	}
	b := &pgx.Batch{}
	b.Queue("SELECT 1")
	b.Queue("SELECT 2")
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, p := range rec.Take() {
		if p.Step != event.StepStore || p.Store != "postgresql" || p.Under != "work" || !p.Ended {
			t.Errorf("phase %+v: want a store phase of postgresql, under the work's context, ended", p)
		}
		if strings.Contains(fmt.Sprintf("%+v", p.Phase), secret) {
			t.Errorf("phase %+v tells an argument", p.Phase)
		}
		s := p.Operation + " " + p.Statement
		if p.Batch > 0 {
			s += fmt.Sprintf(" (%d)", p.Batch)
		}
		if p.Err != nil {
			s += ": failed"
		}
		got = append(got, s)
	}
	// A statement is prepared (and its preparation told) the first time it is sent
	// alone.
	want := []string{
		"SELECT SELECT $1::text", "PREPARE SELECT $1::text",
		"SELECT SELECT * FROM no_such_table: failed",
		"BATCH  (2)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("phases\n %s\nwant\n %s", strings.Join(got, "\n "), strings.Join(want, "\n "))
	}
}

// TestQueryTracerFailing: a tracer that returns a nil end or panics fails no statement
// nor batch.
func TestQueryTracerFailing(t *testing.T) {
	for _, how := range phasetest.Failures {
		t.Run(how, func(t *testing.T) {
			f := &phasetest.Failing{How: how}
			pool := newPool(t, 2, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = postgres.QueryTracer(f) })
			var n int
			if err := pool.QueryRow(t.Context(), "SELECT $1::int", 7).Scan(&n); err != nil || n != 7 {
				t.Fatalf("SELECT 7: %d, %v", n, err)
			}
			b := &pgx.Batch{}
			b.Queue("SELECT 1")
			b.Queue("SELECT 2")
			if err := pool.SendBatch(t.Context(), b).Close(); err != nil {
				t.Fatal(err)
			}
			if f.Begun() < 2 {
				t.Errorf("the tracer was told of %d round trips, want 2 at least", f.Begun())
			}
		})
	}
}
