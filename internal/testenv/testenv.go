// Package testenv tells tests where the external tools and servers they need are, and
// enforces the project's rule for them: on a developer's machine a test whose tool is
// missing skips, but in CI (CI=true) it fails, so that nothing CI is meant to prove is
// silently skipped.
//
// It also decides which tests are too slow for a developer's default run (see [Full]):
// go test ./... runs a representative fast selection, and CI, scripts/test.sh or
// TOLLGATE_TEST_FULL=1 run everything.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	// FullSuite, set to 1 (or true), runs the slow tests too; see [Full].
	FullSuite = "TOLLGATE_TEST_FULL"
)

// InCI reports whether the tests run in CI.
func InCI() bool { return os.Getenv("CI") == "true" }

// Full reports whether the full test suite runs: in CI (CI=true), or when
// TOLLGATE_TEST_FULL is 1 or true, as scripts/test.sh sets it unless told otherwise.
// Otherwise, as in a plain go test ./..., the slow tests skip, each saying why (see
// [SkipUnlessFull]): the generated client packages built and run with the toolchains
// of the languages other than Go, Tollgate instances run as processes and killed with
// kill -9, private database servers stopped under load, Redis Clusters failed over or
// resharded, and the PostgreSQL conformance suites run again behind PgBouncer and with
// each store option; and the memory stores' load tests hold 10,000 accounts rather than
// 100,000. What stays is a representative selection that finishes in a few minutes:
// every package's own tests, the Go client packages, the generation checks of every
// language, and the store suites on the memory stores, and on PostgreSQL and Redis when
// TOLLGATE_TEST_POSTGRES and TOLLGATE_TEST_REDIS name servers.
//
// CI=true always runs everything, whatever TOLLGATE_TEST_FULL says: in CI nothing may
// skip. A test that is slow on a busy machine must still pass there: tests poll with
// generous deadlines and time nothing.
func Full() bool {
	if InCI() {
		return true
	}
	full, _ := strconv.ParseBool(os.Getenv(FullSuite))
	return full
}

// SkipUnlessFull skips the test unless the full suite runs ([Full]). The format and
// its arguments say, for the skip's message, what makes the test slow.
func SkipUnlessFull(t testing.TB, format string, args ...any) {
	t.Helper()
	if !Full() {
		t.Skipf("slow (%s): runs in the full suite, with %s=1 (scripts/test.sh and CI run it)",
			fmt.Sprintf(format, args...), FullSuite)
	}
}

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
