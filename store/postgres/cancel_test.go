package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// TestCancelRequestWaitsForItsAnswer runs a statement on a fake server (a loopback
// listener that speaks enough of the protocol) and ends its context while it runs. The
// pool's connections send a cancel request, and keep its connection open until the
// server closes it, rather than closing it as soon as the statement ends, as
// PgBouncer 1.18 and 1.19.0 need (they crash otherwise); and the call returns only then.
//
//   - answered: the server ends the statement (query_canceled) and closes the cancel
//     request's connection only later, as a pooler does, once it has forwarded the
//     request: the client waits for that close, the call returns the statement's
//     error, and the connection serves the next statement.
//   - unanswered: the server neither ends the statement nor closes the cancel
//     request's connection: the call still returns, with an error, once the client has
//     dropped the connection, and the client closes the cancel request's connection
//     when its wait is over.
func TestCancelRequestWaitsForItsAnswer(t *testing.T) {
	for _, answered := range []bool{true, false} {
		name := map[bool]string{true: "answered", false: "unanswered"}[answered]
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			// clientClosedFirst receives whether the client closed the cancel
			// request's connection before the server did.
			running, clientClosedFirst := make(chan struct{}), make(chan bool, 1)
			go fakeCancelServer(t, ln, answered, running, clientClosedFirst)

			cfg, err := postgres.PoolConfig("postgres://app@" + ln.Addr().String() + "/db?sslmode=disable")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := pgconn.ConnectConfig(ctx, &cfg.ConnConfig.Config)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			stmtCtx, stmtCancel := context.WithCancel(ctx)
			returned := make(chan error, 1)
			go func() {
				_, err := conn.Exec(stmtCtx, "SELECT pg_sleep(60)").ReadAll()
				returned <- err
			}()
			select {
			case <-running:
			case <-ctx.Done():
				t.Fatal("the server received no statement")
			}
			stmtCancel()
			var stmtErr error
			select {
			case stmtErr = <-returned:
			case <-ctx.Done():
				t.Fatal("the statement's call did not return after its context ended")
			}
			var closedFirst bool
			select {
			case closedFirst = <-clientClosedFirst:
			case <-ctx.Done():
				t.Fatal("the server saw no cancel request")
			}
			var pgErr *pgconn.PgError
			switch {
			case answered && closedFirst:
				t.Errorf("the client closed the cancel request's connection before the server answered it")
			case answered && (!errors.As(stmtErr, &pgErr) || pgErr.Code != "57014"):
				t.Errorf("the call returned %v; want the server's query_canceled (57014)", stmtErr)
			case !answered && !closedFirst:
				t.Errorf("the client never closed the cancel request's connection that the server did not answer")
			case !answered && stmtErr == nil:
				t.Errorf("the call of a statement the server never ended returned no error")
			}
			if answered {
				if _, err := conn.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
					t.Errorf("the next statement on the connection: %v", err)
				}
			}
		})
	}
}

// fakeCancelServer serves one connection on ln, whose first statement it leaves
// running (and closes running) until a cancel request for it comes on a second connection. If answered, it
// then ends the statement with query_canceled, waits half of the client's wait for a
// cancel request's answer (postgres.CancelWait) to see whether the client closes the
// cancel request's connection first, closes it, and answers the next statement;
// otherwise it waits for the client to close it. It sends on closedFirst whether the
// client closed the cancel request's connection before the server did.
func fakeCancelServer(t *testing.T, ln net.Listener, answered bool, running chan<- struct{}, closedFirst chan<- bool) {
	const pid, key = 4242, 7
	conn, err := ln.Accept()
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	be := pgproto3.NewBackend(conn, conn)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		t.Error(err)
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.BackendKeyData{ProcessID: pid, SecretKey: []byte{0, 0, 0, key}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		t.Error(err)
		return
	}
	if !receiveQuery(t, be) {
		return
	}
	close(running)

	cc, err := ln.Accept()
	if err != nil {
		t.Error(err)
		return
	}
	defer cc.Close()
	msg, err := pgproto3.NewBackend(cc, cc).ReceiveStartupMessage()
	if err != nil {
		t.Error(err)
		return
	}
	if req, ok := msg.(*pgproto3.CancelRequest); !ok || req.ProcessID != pid || string(req.SecretKey) != string([]byte{0, 0, 0, key}) {
		t.Errorf("the second connection sent %#v; want a cancel request for process %d", msg, pid)
		return
	}
	wait := 30 * time.Second
	if answered {
		be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "57014", Message: "canceling statement due to user request"})
		be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		if err := be.Flush(); err != nil {
			t.Error(err)
			return
		}
		wait = postgres.CancelWait / 2
	}
	// Read until the client closes the connection (an error other than the
	// deadline's), or the wait is over.
	cc.SetReadDeadline(time.Now().Add(wait))
	var buf [64]byte
	var rerr error
	for rerr == nil {
		_, rerr = cc.Read(buf[:])
	}
	var ne net.Error
	closedFirst <- !errors.As(rerr, &ne) || !ne.Timeout()
	cc.Close()
	if !answered {
		return
	}
	if !receiveQuery(t, be) {
		return
	}
	be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		t.Error(err)
	}
}

// TestCancelsBehindPgBouncer cancels hundreds of statements through a real PgBouncer
// in transaction mode, on a pool of PoolerConfig's, each with a deadline of a few
// milliseconds, and runs a statement of a generous deadline after each on the same
// connection: each canceled call fails (PgBouncer 1.18 crashed within a few
// dozen of them when the client closed the cancel request's connection early), no
// cancel request aborts the statement after it, the pooler survives them all, and the
// pool serves on every connection afterwards.
func TestCancelsBehindPgBouncer(t *testing.T) {
	pgb := testenv.StartPgBouncer(t, dsn(t))
	role := testenv.PostgresRole(t, dsn(t), newSchema(t), postgres.DefaultStatementTimeout)
	cfg, err := postgres.PoolerConfig(pgb.DSN(role))
	if err != nil {
		t.Fatal(err)
	}
	const conns, calls = 8, 300
	cfg.MaxConns, cfg.MinConns = conns, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	alive := func(when string) {
		t.Helper()
		if pgb.Exited() {
			t.Fatalf("PgBouncer exited %s; its log:\n%s", when, pgb.Log())
		}
	}

	var canceled, early atomic.Int64
	var wg sync.WaitGroup
	work := make(chan int)
	for range conns {
		wg.Go(func() {
			for i := range work {
				if pgb.Exited() {
					continue
				}
				pool.AcquireFunc(context.Background(), func(c *pgxpool.Conn) error {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rand.IntN(20))*time.Millisecond)
					_, err := c.Exec(ctx, "SELECT pg_sleep(5)")
					cancel()
					var pgErr *pgconn.PgError
					switch {
					case errors.As(err, &pgErr) && pgErr.Code == "57014": // canceled by the server
						canceled.Add(1)
					case errors.Is(err, context.DeadlineExceeded): // before the statement ran, or dropped
						early.Add(1)
					default:
						t.Errorf("call %d: pg_sleep(5) with a deadline of at most 20ms returned %v; want query_canceled or the deadline", i, err)
					}
					if c.Conn().IsClosed() {
						return nil
					}
					ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					var n int
					if err := c.QueryRow(ctx, "SELECT $1::int", i).Scan(&n); err != nil || n != i {
						t.Errorf("call %d: the statement after a canceled one returned %d, %v; want %d", i, n, err, i)
					}
					return nil
				})
			}
		})
	}
	for i := range calls {
		work <- i
		if pgb.Exited() {
			break
		}
	}
	close(work)
	wg.Wait()
	alive(fmt.Sprintf("during %d canceled calls", calls))
	t.Logf("%d calls: %d canceled by the server, %d ended by their deadline first", calls, canceled.Load(), early.Load())

	// Every connection of the pool serves.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held := make([]*pgxpool.Conn, 0, conns)
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatalf("acquiring a connection after the canceled calls: %v", err)
		}
		held = append(held, c)
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&n); err != nil || n != 1 {
			t.Errorf("a statement after the canceled calls returned %d, %v", n, err)
		}
	}
	alive("after the canceled calls")
}

// receiveQuery receives the client's next message, which must be a Query.
func receiveQuery(t *testing.T, be *pgproto3.Backend) bool {
	msg, err := be.Receive()
	if err != nil {
		t.Error(err)
		return false
	}
	if _, ok := msg.(*pgproto3.Query); !ok {
		t.Errorf("the client sent %T; want a Query", msg)
		return false
	}
	return true
}
