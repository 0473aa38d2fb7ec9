package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A Server is a private database server a test starts for itself, on its own port and
// data directory, so that the test may stop and restart it (fault tests) without
// touching the machine's shared servers. The test's cleanup stops it and removes its
// data.
type Server struct {
	// Addr is host:port of the server.
	Addr string
	// DSN is the connection string (PostgreSQL only).
	DSN string

	t       testing.TB
	mu      sync.Mutex
	start   func() error
	stop    func() error
	signal  func(os.Signal) error // nil for a server that cannot be paused
	running bool
}

// Start starts the server again after Stop, on the same port and data.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("starting %s: %v", s.Addr, err)
	}
	s.running = true
}

// Stop stops the server, as a crash or an outage would.
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return
	}
	if err := s.stop(); err != nil {
		s.t.Fatalf("stopping %s: %v", s.Addr, err)
	}
	s.running = false
}

// Pause stops the server's process (SIGSTOP) without killing it: it keeps its
// connections and its data, and answers nothing until Resume. A paused replica
// acknowledges nothing to its master.
func (s *Server) Pause() { s.send(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() { s.send(syscall.SIGCONT) }

func (s *Server) send(sig os.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signal == nil || !s.running {
		s.t.Fatalf("%s cannot be sent %v", s.Addr, sig)
	}
	if err := s.signal(sig); err != nil {
		s.t.Fatalf("%s: %v: %v", s.Addr, sig, err)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now, for a program
// a test starts that takes its address as an argument: tests never bind a fixed port.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitListening waits until something accepts connections on addr.
func waitListening(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %s: %v", addr, d, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a process that is starting
	}
}

// StartRedis starts a private redis-server (from PATH) with no persistence, or calls
// [Unavailable] if there is none. Stop kills it (kill -9); Pause and Resume stop and
// continue its process.
func StartRedis(t testing.TB) *Server {
	t.Helper()
	return startRedis(t)
}

// StartRedisReplica starts a private redis-server, as StartRedis does, that replicates
// primary (REPLICAOF), and waits until it is in sync with it. Started again after Stop,
// it syncs again (in the background: Start returns once it listens).
func StartRedisReplica(t testing.TB, primary *Server) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The primary sends its data at once (it waits 5 seconds by default, for other
	// replicas to share the transfer).
	pc := goredis.NewClient(&goredis.Options{Addr: primary.Addr, MaxRetries: -1, Protocol: 2})
	defer pc.Close()
	if err := pc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatalf("configuring %s: %v", primary.Addr, err)
	}
	host, port, _ := strings.Cut(primary.Addr, ":")
	s := startRedis(t, "--replicaof", host, port)
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	if err := Wait(ctx, func() error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if infoField(info, "master_link_status") != "up" || infoField(info, "master_sync_in_progress") != "0" {
			return fmt.Errorf("replica %s of %s: master_link_status:%s", s.Addr, primary.Addr, infoField(info, "master_link_status"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

func startRedis(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server is not installed: %v", err)
	}
	port := FreePort(t)
	dir := t.TempDir()
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), t: t}
	var cmd *exec.Cmd
	s.start = func() error {
		cmd = exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--daemonize", "no"}, args...)...)
		if err := cmd.Start(); err != nil {
			return err
		}
		return waitListening(s.Addr, 10*time.Second)
	}
	s.stop = func() error {
		if err := cmd.Process.Kill(); err != nil {
			return err
		}
		cmd.Wait()
		return nil
	}
	s.signal = func(sig os.Signal) error { return cmd.Process.Signal(sig) }
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// StartPostgres initializes a private PostgreSQL cluster in a temporary directory
// (initdb, run as the postgres system user when the test runs as root) and starts it on
// its own port, or calls [Unavailable] if PostgreSQL is not installed.
func StartPostgres(t testing.TB) *Server {
	t.Helper()
	bin := postgresBin()
	if bin == "" {
		Unavailable(t, "PostgreSQL's initdb and pg_ctl are not installed")
	}
	port := FreePort(t)
	dir, err := os.MkdirTemp("", "tollgate-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	asPostgres := asPostgresUser(t, dir, data, sock)
	if out, err := asPostgres(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s := &Server{
		Addr: "127.0.0.1:" + strconv.Itoa(port),
		DSN:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		t:    t,
	}
	pgctl := filepath.Join(bin, "pg_ctl")
	s.start = func() error {
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", port, sock)
		if out, err := asPostgres(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start").CombinedOutput(); err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	}
	s.stop = func() error {
		if out, err := asPostgres(pgctl, "-D", data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// postgresBin returns the directory of PostgreSQL's server programs, or "".
func postgresBin() string {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p)
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

// asPostgresUser returns a command maker that runs programs as the postgres system user
// when the test runs as root (PostgreSQL refuses to run as root), after giving that user
// the directories.
func asPostgresUser(t testing.TB, dirs ...string) func(name string, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		return func(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		Unavailable(t, "running as root, and there is no postgres user to run PostgreSQL as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range dirs {
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
		cmd.Stdin = bytes.NewReader(nil)
		return cmd
	}
}

// Wait polls ready until it returns nil or ctx ends; for tests that wait for a server
// or a service to come back after a fault.
func Wait(ctx context.Context, ready func() error) error {
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
