package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/event"
)

// QueryTracer returns a pgx tracer that tells t of each round trip a connection makes
// to the server, as an [event.StepStore] phase under the context of the work that made
// it: a statement (pgx.QueryTracer), its preparation (pgx.PrepareTracer), or a batch
// of statements (pgx.BatchTracer). Set it on the connections of the pool the stores
// run on, before the pool is made:
//
//	cfg, err := postgres.PoolConfig(url)
//	...
//	cfg.ConnConfig.Tracer = postgres.QueryTracer(tracer) // a tracing.Tracer, or a service's Events()
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
//
// The phase names the statement's first keyword as its Operation and carries the
// statement's text, whose values are placeholders ($1): a statement's arguments (a
// key's hash, an account's id, amounts) are never told. A statement the server
// refused ends its phase with the server's error. A tracer that panics fails no
// statement: as a service's bus does ([event.Bus.Begin]), the hook recovers the panic
// and logs it (to slog.Default, unless t is the bus, which logs to its Logger). (A pool
// that has a tracer of its own already combines both with pgx's multitracer package.)
func QueryTracer(t event.Tracer) pgx.QueryTracer { return queryTracer{event.Guard(t)} }

type queryTracer struct{ t event.Tracer }

// endKey is the key, in the context a round trip runs under, of the function that
// ends its phase.
type endKey struct{}

func (q queryTracer) begin(ctx context.Context, p event.Phase) context.Context {
	p.Step, p.Store = event.StepStore, "postgresql"
	ctx, end := q.t.Begin(ctx, p)
	return context.WithValue(ctx, endKey{}, end)
}

func end(ctx context.Context, err error) {
	if end, ok := ctx.Value(endKey{}).(func(error)); ok {
		end(err)
	}
}

// TraceQueryStart begins the phase of a statement.
func (q queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return q.begin(ctx, event.Phase{Operation: operation(d.SQL), Statement: d.SQL})
}

// TraceQueryEnd ends the phase of a statement.
func (q queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	end(ctx, d.Err)
}

// TracePrepareStart begins the phase of a statement's preparation.
func (q queryTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	return q.begin(ctx, event.Phase{Operation: "PREPARE", Statement: d.SQL})
}

// TracePrepareEnd ends the phase of a statement's preparation.
func (q queryTracer) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	end(ctx, d.Err)
}

// TraceBatchStart begins the phase of a batch of statements sent together.
func (q queryTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	p := event.Phase{Operation: "BATCH"}
	if d.Batch != nil {
		p.Batch = d.Batch.Len()
	}
	return q.begin(ctx, p)
}

// TraceBatchQuery is told of each statement of a batch, which is part of the batch's
// round trip.
func (q queryTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd ends the phase of a batch.
func (q queryTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchEndData) {
	end(ctx, d.Err)
}

// operation returns the first keyword of a SQL statement, in upper case ("SELECT"),
// after any white space and comments; "" if it starts with none.
func operation(sql string) string {
	for {
		sql = strings.TrimLeft(sql, " \t\r\n(")
		switch {
		case strings.HasPrefix(sql, "--"):
			_, sql, _ = strings.Cut(sql, "\n")
			continue
		case strings.HasPrefix(sql, "/*"):
			_, sql, _ = strings.Cut(sql, "*/")
			continue
		}
		break
	}
	n := 0
	for n < len(sql) && n < 32 && (sql[n]|0x20 >= 'a' && sql[n]|0x20 <= 'z' || sql[n] == '_') {
		n++
	}
	word := sql[:n]
	for i := 0; i < len(word); i++ {
		if c := word[i]; c >= 'a' && c <= 'z' {
			return strings.ToUpper(word)
		}
	}
	return word
}
