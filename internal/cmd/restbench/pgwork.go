package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgSettle is how long a read of PostgreSQL's statistics waits for the backends to
// publish theirs: a backend that has published within the last second publishes
// again once it has been idle for 10 s (PostgreSQL 15's PGSTAT_IDLE_INTERVAL), so
// pg_stat_database and pg_stat_wal lag behind the work by up to that.
const pgSettle = 11 * time.Second

// pgCounters is a reading of what PostgreSQL has done, or the difference of two
// readings, or that divided by the calls made between them. A figure PostgreSQL does
// not give (pg_stat_statements not loaded, a server on another machine) is NaN.
type pgCounters struct {
	statements float64 // statements the clients sent to the database (pg_stat_statements calls, top level)
	nested     float64 // statements run inside functions (pg_stat_statements.track = all)
	xacts      float64 // transactions committed and rolled back (pg_stat_database)
	rollbacks  float64 // of which rolled back
	inserted   float64 // rows inserted (pg_stat_database)
	updated    float64 // rows updated
	deleted    float64 // rows deleted
	walBytes   float64 // WAL written by the whole cluster (pg_current_wal_insert_lsn)
	walRecords float64 // WAL records of the whole cluster (pg_stat_wal)
	walFPI     float64 // of which full-page images
	backendCPU float64 // CPU of the server's connections' backends, µs (/proc)
	otherCPU   float64 // CPU of the server's other processes (the other backends, the WAL writer, the checkpointer...), µs
}

// sub returns c - before, field by field.
func (c pgCounters) sub(before pgCounters) pgCounters {
	return c.combine(before, func(a, b float64) float64 { return a - b })
}

// perCall returns c divided by the number of calls n.
func (c pgCounters) perCall(n float64) pgCounters {
	return c.combine(c, func(a, _ float64) float64 { return a / n })
}

// combine applies f to each field of c and the same field of d.
func (c pgCounters) combine(d pgCounters, f func(a, b float64) float64) pgCounters {
	out := c
	of, df := out.fields(), d.fields()
	for i := range of {
		*of[i] = f(*of[i], *df[i])
	}
	return out
}

// fields returns pointers to every field of c.
func (c *pgCounters) fields() []*float64 {
	return []*float64{&c.statements, &c.nested, &c.xacts, &c.rollbacks, &c.inserted, &c.updated, &c.deleted,
		&c.walBytes, &c.walRecords, &c.walFPI, &c.backendCPU, &c.otherCPU}
}

// rowsWritten is the rows inserted, updated and deleted.
func (c pgCounters) rowsWritten() float64 { return c.inserted + c.updated + c.deleted }

// String describes counters per call.
func (c pgCounters) String() string {
	f := func(v float64, format string) string {
		if math.IsNaN(v) {
			return "n/a"
		}
		return fmt.Sprintf(format, v)
	}
	return fmt.Sprintf("%s statements (and %s in functions), %s transactions (%s rolled back), %s rows written (%s inserted, %s updated, %s deleted), "+
		"WAL %s bytes in %s records (%s full-page images), CPU %s µs in its connections' backends + %s µs in other postgres processes",
		f(c.statements, "%.2f"), f(c.nested, "%.2f"), f(c.xacts, "%.2f"), f(c.rollbacks, "%.3f"), f(c.rowsWritten(), "%.2f"),
		f(c.inserted, "%.2f"), f(c.updated, "%.2f"), f(c.deleted, "%.2f"),
		f(c.walBytes, "%.0f"), f(c.walRecords, "%.2f"), f(c.walFPI, "%.3f"), f(c.backendCPU, "%.1f"), f(c.otherCPU, "%.1f"))
}

// medianWork returns the median of each field of the readings.
func medianWork(ws []pgCounters) pgCounters {
	var out pgCounters
	for i, f := range out.fields() {
		vals := make([]float64, len(ws))
		for j := range ws {
			vals[j] = *ws[j].fields()[i]
		}
		*f = median(vals)
	}
	return out
}

// A pgWatcher reads PostgreSQL's counters of one database, and the CPU of the backends
// serving the connections whose application_name is app, on a connection of its own.
type pgWatcher struct {
	conn       *pgx.Conn
	app        string
	statements bool // pg_stat_statements answers
	postmaster int  // the process id of the server's postmaster, if it runs on this machine (0 if not)
	// settle is how long a reading waits for the statistics to be published: pgSettle.
	settle time.Duration
}

// newPGWatcher connects to the database of dsn and finds out what it can read.
func newPGWatcher(dsn, app string) (*pgWatcher, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	w := &pgWatcher{conn: conn, app: app, settle: pgSettle}
	// Its own reads are not counted, where its role may say so (a superuser).
	conn.Exec(ctx, "SET pg_stat_statements.track = 'none'")
	var n float64
	w.statements = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_statements").Scan(&n) == nil
	var pid int
	if conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid) == nil {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		stat, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil && err2 == nil && strings.TrimSpace(string(comm)) == "postgres" {
			w.postmaster, _ = statParent(stat)
		}
	}
	return w, nil
}

func (w *pgWatcher) close() { w.conn.Close(context.Background()) }

// describeSources says where the counters come from and which are missing.
func (w *pgWatcher) describeSources() string {
	var missing []string
	if !w.statements {
		missing = append(missing, "statements (pg_stat_statements is not loaded: shared_preload_libraries, then CREATE EXTENSION pg_stat_statements in the database)")
	}
	if w.postmaster == 0 {
		missing = append(missing, "CPU (PostgreSQL is not on this machine)")
	}
	out := fmt.Sprintf("PostgreSQL's work read %s after each drive, for its statistics to be published", w.settle)
	if missing != nil {
		out += "; no " + strings.Join(missing, ", no ")
	}
	return out
}

// read returns the counters. With settle, it first waits for the backends to publish
// their statistics, and reads everything at once: a reading before a drive. Without
// it, it reads what is up to date at once (statements, WAL bytes, CPU), then waits and
// reads the rest: a reading after a drive, whose lagging counters count the work of
// the wait too (the server's background work, if any).
func (w *pgWatcher) read(settle bool) (pgCounters, error) {
	ctx := context.Background()
	if settle {
		time.Sleep(w.settle)
	}
	c := pgCounters{statements: math.NaN(), nested: math.NaN(), backendCPU: math.NaN(), otherCPU: math.NaN()}
	if w.statements {
		if err := w.conn.QueryRow(ctx, `SELECT coalesce(sum(calls) FILTER (WHERE toplevel), 0)::float8,
			coalesce(sum(calls) FILTER (WHERE NOT toplevel), 0)::float8 FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&c.statements, &c.nested); err != nil {
			return c, fmt.Errorf("pg_stat_statements: %w", err)
		}
	}
	if err := w.conn.QueryRow(ctx, "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::float8").Scan(&c.walBytes); err != nil {
		return c, fmt.Errorf("pg_current_wal_insert_lsn: %w", err)
	}
	if w.postmaster != 0 {
		rows, _ := w.conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", w.app)
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return c, fmt.Errorf("pg_stat_activity: %w", err)
		}
		if len(pids) == 0 {
			return c, errors.New("no connection of the server in pg_stat_activity (application_name " + w.app + ")")
		}
		c.backendCPU = 0
		for _, pid := range pids {
			us, err := processCPU(int(pid))
			if err != nil {
				return c, fmt.Errorf("backend %d: %w", pid, err)
			}
			c.backendCPU += us
		}
		c.otherCPU = familyCPU(w.postmaster) - c.backendCPU
	}
	if !settle {
		time.Sleep(w.settle)
	}
	if _, err := w.conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return c, err
	}
	if err := w.conn.QueryRow(ctx, `SELECT (xact_commit + xact_rollback)::float8, xact_rollback::float8,
		tup_inserted::float8, tup_updated::float8, tup_deleted::float8
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.xacts, &c.rollbacks, &c.inserted, &c.updated, &c.deleted); err != nil {
		return c, fmt.Errorf("pg_stat_database: %w", err)
	}
	if err := w.conn.QueryRow(ctx, "SELECT wal_records::float8, wal_fpi::float8 FROM pg_stat_wal").Scan(&c.walRecords, &c.walFPI); err != nil {
		return c, fmt.Errorf("pg_stat_wal: %w", err)
	}
	return c, nil
}
