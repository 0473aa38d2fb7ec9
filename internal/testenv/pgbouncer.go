package testenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A PgBouncer is a private PgBouncer that a test starts in front of a PostgreSQL
// server, in transaction mode (pool_mode = transaction: a server connection is a
// client's for one transaction only), as managed poolers run. Clients log in as any
// role of the server (auth_type trust, the role looked up on the server), so that
// each test can connect as a role of its own ([PostgresRole]). The test's cleanup
// stops it.
type PgBouncer struct {
	// Addr is host:port of the pooler.
	Addr string
	// Version is the version of the PgBouncer program: major, minor, patch.
	Version [3]int

	database string
	done     chan struct{} // closed when the process has exited
	logPath  string
}

// Exited reports whether the pooler's process has exited, which before the test's
// cleanup means it crashed ([PgBouncer.Log] says why).
func (p *PgBouncer) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Log returns what the pooler has logged so far.
func (p *PgBouncer) Log() string {
	log, _ := os.ReadFile(p.logPath)
	return string(log)
}

// PreparedStatementsSince is the first PgBouncer version that keeps protocol-level
// named prepared statements in transaction mode (max_prepared_statements), which pgx's
// default exec mode (cache_statement) needs.
var PreparedStatementsSince = [3]int{1, 21, 0}

// PreparedStatements reports whether the pooler keeps named prepared statements across
// transactions: PgBouncer is at least [PreparedStatementsSince], and StartPgBouncer
// sets max_prepared_statements.
func (p *PgBouncer) PreparedStatements() bool {
	for i := range p.Version {
		if p.Version[i] != PreparedStatementsSince[i] {
			return p.Version[i] > PreparedStatementsSince[i]
		}
	}
	return true
}

// DSN returns a connection string to the upstream database through the pooler, as
// role, with no startup parameter besides the role and the database.
func (p *PgBouncer) DSN(role string) string {
	u := url.URL{Scheme: "postgres", User: url.User(role), Host: p.Addr, Path: "/" + p.database, RawQuery: "sslmode=disable"}
	return u.String()
}

// pgbouncerBin returns the path of the pgbouncer program, or "".
func pgbouncerBin() string {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// StartPgBouncer starts a private PgBouncer on a free loopback port, in transaction
// mode, in front of the server and database of dsn (whose role must be able to read
// pg_authid: the pooler looks up the roles clients log in as with it), or calls
// [Unavailable] when PgBouncer is not installed (Debian package pgbouncer;
// scripts/test.sh installs it). On PgBouncer 1.21 and later it keeps named prepared
// statements (max_prepared_statements = 200). The test's cleanup stops it, and it stops
// with the test's process if that dies first.
func StartPgBouncer(t testing.TB, dsn string) *PgBouncer {
	t.Helper()
	bin := pgbouncerBin()
	if bin == "" {
		Unavailable(t, "pgbouncer is not installed (Debian package pgbouncer)")
	}
	up, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parsing %s: %v", Postgres, err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("pgbouncer --version: %v", err)
	}
	m := regexp.MustCompile(`PgBouncer (\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("pgbouncer --version printed %q, with no version", out)
	}
	p := &PgBouncer{database: up.Database}
	for i := range p.Version {
		p.Version[i], _ = strconv.Atoi(m[i+1])
	}

	dir, err := os.MkdirTemp("", "tollgate-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port := FreePort(t)
	p.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var ini strings.Builder
	fmt.Fprintf(&ini, "[databases]\n* = host=%s port=%d\n\n[pgbouncer]\n", up.Host, up.Port)
	for _, kv := range [][2]string{
		{"listen_addr", "127.0.0.1"},
		{"listen_port", strconv.Itoa(port)},
		{"unix_socket_dir", ""},
		{"pool_mode", "transaction"},
		{"auth_type", "trust"},
		{"auth_file", filepath.Join(dir, "users.txt")},
		{"auth_user", up.User},
		{"max_client_conn", "2000"},
		// Each role has a pool of its own: small pools, and server connections closed
		// soon after their test, keep the server well below its max_connections.
		{"default_pool_size", "8"},
		{"server_idle_timeout", "5"},
		{"log_connections", "0"},
		{"log_disconnections", "0"},
	} {
		fmt.Fprintf(&ini, "%s = %s\n", kv[0], kv[1])
	}
	if p.PreparedStatements() {
		ini.WriteString("max_prepared_statements = 200\n")
	}
	users := fmt.Sprintf("%q \"\"\n", up.User)
	for name, text := range map[string]string{"pgbouncer.ini": ini.String(), "users.txt": users} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// SIGTERM when the test's process dies, even without its cleanups (a panic, a
	// timeout, a kill): no pooler outlives its tests.
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if os.Geteuid() == 0 { // PgBouncer refuses to run as root: it runs as postgres
		u, err := user.Lookup("postgres")
		if err != nil {
			Unavailable(t, "running as root, and there is no postgres user to run PgBouncer as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, f := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "users.txt")} {
			if err := os.Chown(f, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		// Not pgbouncer -u, which would change user after the exec, and so clear
		// the parent-death signal.
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	p.logPath = filepath.Join(dir, "log")
	log, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close() // the child has its own descriptor
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = log, log, attr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting pgbouncer: %v", err)
	}
	done := make(chan struct{})
	p.done = done
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // immediate shutdown
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Wait(ctx, func() error {
		select {
		case <-done:
			return fmt.Errorf("pgbouncer exited")
		default:
		}
		conn, err := pgx.Connect(ctx, p.DSN(up.User))
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}); err != nil {
		out, _ := os.ReadFile(p.logPath)
		t.Fatalf("pgbouncer on %s is not ready: %v\n%s", p.Addr, err, out)
	}
	return p
}
