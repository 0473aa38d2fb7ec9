// Package testenv tells tests where the external tools and servers they need are, and
// enforces the project's rule for them: on a developer's machine a test whose tool is
// missing skips, but in CI (CI=true) it fails, so that nothing CI is meant to prove is
// silently skipped.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Environment variables that point tests at their tools and servers. scripts/test.sh
// sets them.
const (
	// NodeTools is a directory whose node_modules/.bin holds the npm tools the tests
	// run (see tools/npm/package.json).
	NodeTools = "TOLLGATE_NODE_TOOLS"
	// Postgres is a PostgreSQL DSN for store tests.
	Postgres = "TOLLGATE_TEST_POSTGRES"
	// Redis is a Redis address (host:port) for store tests.
	Redis = "TOLLGATE_TEST_REDIS"
)

// InCI reports whether the tests run in CI.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable skips the test, or fails it in CI, because what it needs is missing.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI must run this test, but: "+format, args...)
	}
	t.Skipf(format, args...)
}

// Var returns the value of the environment variable name, or calls [Unavailable].
func Var(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Unavailable(t, "%s is not set; scripts/test.sh sets it", name)
	}
	return v
}

// NodeTool returns the path of an installed npm tool (node_modules/.bin/<name> under
// $TOLLGATE_NODE_TOOLS), or calls [Unavailable].
func NodeTool(t testing.TB, name string) string {
	t.Helper()
	dir := Var(t, NodeTools)
	p := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		Unavailable(t, "npm tool %s is not installed in %s: %v", name, dir, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		Unavailable(t, "node is not on PATH")
	}
	return p
}

// A Clock is a clock for tests that moves only when the test moves it. Pass its Now
// method as a service's clock. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock set to t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
