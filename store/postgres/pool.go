package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The pool settings of [PoolConfig]. The package documentation ("Pool settings") gives
// the reasoning.
const (
	// DefaultMaxConns is the size of the pool: enough for a busy instance's admissions
	// and settlements in flight, few enough that several instances stay well under the
	// server's max_connections (100 by default).
	DefaultMaxConns = 16
	// DefaultConnectTimeout bounds the dial to the server, so that an unreachable store
	// fails calls quickly instead of holding them.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultStatementTimeout is the server-side bound on any one statement (the
	// statement_timeout setting of the pool's sessions): a call that waits longer, for a
	// lock or for a saturated server, is aborted and rolled back.
	DefaultStatementTimeout = 5 * time.Second
	// DefaultHealthCheckPeriod is how often the pool checks its idle connections, so
	// that it replaces the connections an outage broke soon after the server is back.
	DefaultHealthCheckPeriod = 10 * time.Second
)

// PoolConfig parses a connection string (a postgres:// URL or key=value pairs, as
// pgxpool.ParseConfig accepts) into a pool configuration with the settings this
// package recommends; the host may change any of them before creating the pool with
// pgxpool.NewWithConfig:
//
//   - MaxConns [DefaultMaxConns], MinConns 1, HealthCheckPeriod
//     [DefaultHealthCheckPeriod] and ConnectTimeout [DefaultConnectTimeout], unless the
//     string sets them (pool_max_conns, pool_min_conns, pool_health_check_period,
//     connect_timeout).
//   - statement_timeout [DefaultStatementTimeout] and application_name "tollgate" for
//     every session (unless the string sets them).
//   - A canceled or expired context sends the server a cancel request for the running
//     statement, instead of only dropping the connection: the server then aborts the
//     call and rolls it back, rather than carrying on with a call whose caller has
//     given up. The connection is dropped too if the statement has not ended a second
//     later. The cancel request's connection is kept open until the server (or the
//     pooler) closes it, two seconds at most, and the call returns then: closing it
//     earlier crashes PgBouncer 1.18 and 1.19.0, and a cancel request still on its way
//     could abort the connection's next statement.
//
// Nothing else is changed: synchronous_commit stays as the server has it (on, durable,
// by default). Give the pool's sessions a search_path (RuntimeParams["search_path"], or
// the role's or database's setting) to put the store in a schema of its own. Through a
// connection pooler in transaction mode, use [PoolerConfig]: it sends no startup
// parameter.
func PoolConfig(connString string) (*pgxpool.Config, error) {
	cfg, err := poolConfig(connString)
	if err != nil {
		return nil, err
	}
	params := cfg.ConnConfig.RuntimeParams
	if _, ok := params["statement_timeout"]; !ok {
		params["statement_timeout"] = DefaultStatementTimeout.String()
	}
	if _, ok := params["application_name"]; !ok {
		params["application_name"] = "tollgate"
	}
	return cfg, nil
}

// PoolerConfig is [PoolConfig] for a server reached through a connection pooler in
// transaction mode (PgBouncer with pool_mode = transaction, and the managed poolers
// built like it), where consecutive transactions of one client connection may run on
// different server sessions, and where session state set at connection time does not
// follow the client:
//
//   - No startup parameter besides the role and the database (a pooler refuses the
//     ones it does not know, or drops them): no statement_timeout, no application_name.
//     Give the role the settings the store needs, which the server applies to every
//     session it opens for the role, pooled or not: ALTER ROLE ... SET statement_timeout
//     = '5s' ([DefaultStatementTimeout]) and, for a schema of its own, ALTER ROLE ... SET
//     search_path = tollgate (see the package documentation, "Behind a pooler").
//   - Statements run in pgx's exec mode ([pgx.QueryExecModeExec]: one round trip, an
//     unnamed statement, parameters sent as text and typed by the server), which needs
//     no prepared statement to outlive its transaction, unless the string sets
//     default_query_exec_mode. simple_protocol works too, and so does pgx's default,
//     cache_statement, behind a pooler that keeps named prepared statements (PgBouncer
//     1.21 or later with max_prepared_statements above 0).
//   - Everything else as PoolConfig sets it: the pool's size, timeouts, health checks
//     and cancel requests (a pooler forwards them to the session running the
//     statement).
//
// The connection string's own parameters are sent as given: set none that the pooler
// does not accept.
func PoolerConfig(connString string) (*pgxpool.Config, error) {
	cfg, err := poolConfig(connString)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(connString, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	return cfg, nil
}

// poolConfig parses connString with the pool settings of PoolConfig that need no
// startup parameter.
func poolConfig(connString string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	set := func(param string) bool { return strings.Contains(connString, param) }
	if !set("pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	if !set("pool_min_conns") {
		cfg.MinConns = 1
	}
	if !set("pool_health_check_period") {
		cfg.HealthCheckPeriod = DefaultHealthCheckPeriod
	}
	if !set("connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &cancelRequestHandler{conn: c}
	}
	return cfg, nil
}

// The bounds of a cancel request (see cancelRequestHandler).
const (
	// cancelDropAfter is how long after a context ends the server has to end the
	// statement, before the connection is dropped.
	cancelDropAfter = time.Second
	// cancelWait is how long the client waits for the server (or the pooler) to close
	// the cancel request's connection, which it does once the request is handled.
	cancelWait = 2 * time.Second
)

// A cancelRequestHandler is the pool's ctxwatch.Handler: when a statement's context
// ends, it sends the server a cancel request on a connection of its own, and drops the
// statement's connection if the statement has not ended [cancelDropAfter] later. Unlike
// pgconn.CancelRequestContextWatcherHandler, it keeps the cancel request's connection
// open until the server closes it (or [cancelWait] has passed), even when the statement
// ended first: PgBouncer 1.18 and 1.19.0 crash when a client closes a cancel request's
// connection while the pooler is still forwarding it (fixed in 1.19.1). The
// statement's call returns once the cancel request is over, so that a cancel request
// still on its way does not abort the connection's next statement.
type cancelRequestHandler struct {
	conn *pgconn.PgConn
	done chan struct{} // closed when the cancel request is over
}

func (h *cancelRequestHandler) HandleCancel(context.Context) {
	now := time.Now()
	h.conn.Conn().SetDeadline(now.Add(cancelDropAfter))
	done := make(chan struct{})
	h.done = done
	go func() {
		defer close(done)
		// Not canceled when the statement ends: only the server's close, or the
		// deadline, ends the wait.
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(cancelWait))
		defer cancel()
		h.conn.CancelRequest(ctx) // returns when the server closes the connection
	}()
}

func (h *cancelRequestHandler) HandleUnwatchAfterCancel() {
	<-h.done
	h.conn.Conn().SetDeadline(time.Time{})
}
