package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestPGCounters checks the arithmetic of the readings: the difference, the share of a
// call, the medians and the description, where a figure PostgreSQL did not give stays
// "n/a".
func TestPGCounters(t *testing.T) {
	before := pgCounters{statements: 100, nested: math.NaN(), xacts: 10, inserted: 5, updated: 1, walBytes: 1000, backendCPU: 50}
	after := pgCounters{statements: 300, nested: math.NaN(), xacts: 30, inserted: 45, updated: 21, deleted: 20, walBytes: 9000, backendCPU: 850}
	w := after.sub(before).perCall(20)
	want := pgCounters{statements: 10, nested: math.NaN(), xacts: 1, inserted: 2, updated: 1, deleted: 1, walBytes: 400, backendCPU: 40}
	gf, wf := w.fields(), want.fields()
	for i := range gf {
		if *gf[i] != *wf[i] && !(math.IsNaN(*gf[i]) && math.IsNaN(*wf[i])) {
			t.Errorf("field %d: %v, want %v (all: %+v)", i, *gf[i], *wf[i], w)
		}
	}
	if w.rowsWritten() != 4 {
		t.Errorf("rows written %v, want 4", w.rowsWritten())
	}
	s := w.String()
	for _, part := range []string{"10.00 statements (and n/a in functions)", "1.00 transactions", "4.00 rows written (2.00 inserted, 1.00 updated, 1.00 deleted)", "WAL 400 bytes", "CPU 40.0 µs"} {
		if !strings.Contains(s, part) {
			t.Errorf("%q lacks %q", s, part)
		}
	}
	m := medianWork([]pgCounters{{xacts: 1, walBytes: 9}, {xacts: 3, walBytes: 1}, {xacts: 2, walBytes: 5}})
	if m.xacts != 2 || m.walBytes != 5 {
		t.Errorf("medians: %+v, want xacts 2 and walBytes 5", m)
	}
}

func TestStatParent(t *testing.T) {
	ppid, err := statParent([]byte("123 (post gres) S 77 123 123 0 -1 4194560 1 0 0 0 5 6 0 0 20 0 1 0 1 1 1"))
	if err != nil || ppid != 77 {
		t.Errorf("statParent: %d, %v; want 77", ppid, err)
	}
	if _, err := statParent([]byte("garbage")); err == nil {
		t.Error("statParent of garbage: no error")
	}
}

func TestWithApplicationName(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u@h:5432/db?sslmode=disable": "postgres://u@h:5432/db?application_name=rb&sslmode=disable",
		"postgresql://u@h/db":                    "postgresql://u@h/db?application_name=rb",
		"host=h dbname=db":                       "host=h dbname=db application_name=rb",
	} {
		if got, err := withApplicationName(dsn, "rb"); err != nil || got != want {
			t.Errorf("withApplicationName(%q) = %q, %v; want %q", dsn, got, err, want)
		}
	}
}

// TestPGWatcher reads the counters around rows a connection of its own inserts in a
// temporary table: the watcher counts at least those rows and transactions (other
// clients of the test database may add to them), and WAL.
func TestPGWatcher(t *testing.T) {
	dsn := testenv.Var(t, testenv.Postgres)
	var b [6]byte
	rand.Read(b[:])
	app := "restbench_test_" + hex.EncodeToString(b[:])
	appDSN, err := withApplicationName(dsn, app)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, appDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	w, err := newPGWatcher(dsn, app)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.settle = 0
	before, err := w.read(true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE pgwork_test (n int)"); err != nil {
		t.Fatal(err)
	}
	const rows = 50
	for i := range rows {
		if _, err := conn.Exec(ctx, "INSERT INTO pgwork_test VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	// The connection publishes its statistics when it is next idle.
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		after, err := w.read(false)
		if err != nil {
			t.Fatal(err)
		}
		d := after.sub(before)
		if d.inserted >= rows && d.xacts >= rows {
			if d.walBytes <= 0 {
				t.Errorf("WAL bytes %v after %d inserts", d.walBytes, rows)
			}
			if w.statements && d.statements < rows {
				t.Errorf("%v statements, want at least %d", d.statements, rows)
			}
			if w.postmaster != 0 && (d.backendCPU < 0 || math.IsNaN(d.backendCPU)) {
				t.Errorf("backend CPU %v", d.backendCPU)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d inserts: %s", rows, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
