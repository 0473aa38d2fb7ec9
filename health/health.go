// Package health answers the two questions an orchestrator or a load balancer asks of
// a Tollgate process: does it live, and can it serve.
//
//   - Liveness (/healthz): 200 for as long as the process serves HTTP. It checks
//     nothing else, so that a probe that restarts a process when it fails (a
//     Kubernetes liveness probe) never restarts every instance because a store they
//     share is down, which a restart would not mend.
//   - Readiness (/readyz): 200 when every store the host names answers a ping, 503
//     otherwise, with a JSON body naming the stores, by their roles, that are not
//     reachable. A probe that takes an instance out of rotation when it fails (a
//     Kubernetes readiness probe, a load balancer's health check) uses it.
//
// A [Checker] pings the stores; its [Checker.Live] and [Checker.Ready] handlers serve the
// two endpoints on whatever mux and listener the host chooses, usually one of their own
// for operators, apart from the API (the example servers' -ops-addr).
//
// # The stores
//
// A store is reachable when its Ping returns nil within [Options.Timeout]: the
// [Pinger] interface. Every store of this module implements it: store/memory's always
// answer nil, store/postgres's run SELECT 1 on their pool (the simple protocol, no
// prepared statement and no session state, so that it works behind a pooler in
// transaction mode), and store/redis's send PING (to every master of a Redis Cluster).
// The host names each store by its role, what it keeps ("keys", "ledger", "rates",
// ...): the answers and the logs name the role, never the store's kind or address.
// A store value given in several roles is pinged once per check.
//
// Readiness reflects the stores the instances share: when one is down, every instance
// answers 503 at once. That is what a load balancer needs to know (no instance can
// serve), but a liveness probe must not use /readyz.
//
// # Cost
//
// /readyz may be polled every second by several pollers at once. A Checker runs one
// check at a time: the requests that arrive while it runs wait for it and share its
// result, and the result is served without a new check for [Options.CacheFor] after
// the check ends ([DefaultCacheFor], half a second). A check pings the stores in
// parallel, each bounded by [Options.Timeout] ([DefaultTimeout], half a second), so an
// answer takes at most about that long even when a store hangs: a store that has not
// answered by then counts as not reachable. A store that stops is reported within
// CacheFor plus Timeout, a second by default; one that comes back, likewise.
//
// # Answers
//
// Both endpoints answer GET and HEAD (405 otherwise) with JSON, never cached
// (Cache-Control: no-store):
//
//	GET /healthz  200 {"status":"ok"}
//	GET /readyz   200 {"status":"ready"}
//	GET /readyz   503 {"status":"unavailable","unreachable":["keys","ledger"],
//	                   "message":"not ready: the keys and ledger stores are not reachable"}
//
// The stores' errors are logged ([Options.Logger]), once when a store stops answering
// and once when it answers again, never in an answer.
//
// The package imports the standard library only, so that a store package may declare
// that it implements [Pinger] at no cost.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
)

// A Pinger is a store that tells whether it can be reached.
type Pinger interface {
	// Ping returns nil when the store is reachable and answers, and an error when it
	// cannot be reached or does not answer before ctx ends. It reads and changes no
	// state of the store's, and is safe for concurrent use.
	Ping(ctx context.Context) error
}

// A Store is one store a [Checker] pings, with the role it plays.
type Store struct {
	// Role names the store in answers and logs: what it keeps ("keys", "ledger",
	// "rates", "webhooks"), never where it is or what it runs on. It is 1 to
	// [MaxRole] bytes of ASCII letters, digits, spaces, '-', '_', '.' and '/', and
	// unique among a Checker's stores.
	Role string
	// Pinger is the store.
	Pinger Pinger
}

// MaxRole is the longest [Store.Role], in bytes.
const MaxRole = 64

// Defaults of [Options].
const (
	// DefaultTimeout bounds each ping: short enough that an answer comes within a
	// probe's usual timeout (a Kubernetes probe's is a second), long enough for any
	// store that serves calls.
	DefaultTimeout = 500 * time.Millisecond
	// DefaultCacheFor is how long a check's result is served before the stores are
	// pinged again.
	DefaultCacheFor = 500 * time.Millisecond
)

// Options configures a [Checker]. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Timeout bounds each ping of a check; a store that has not answered by then is
	// not reachable. The default is [DefaultTimeout].
	Timeout time.Duration
	// CacheFor is how long the result of a check is served, after the check ends,
	// before the stores are pinged again. The default is [DefaultCacheFor].
	CacheFor time.Duration
	// Logger receives a line when a store stops answering (WARN, with its error) and
	// when it answers again (INFO). The default is slog.Default().
	Logger *slog.Logger
}

// A Report is the result of a check.
type Report struct {
	// Ready is whether every store answered.
	Ready bool
	// Unreachable are the roles of the stores that did not, in the order the
	// Checker was given them.
	Unreachable []string
}

// A Checker pings a host's stores, one check at a time, and serves the results. It is
// safe for concurrent use. Create it with [New].
type Checker struct {
	groups   []group
	roles    []string // every role, in the order given
	groupOf  []int    // the group of each role
	timeout  time.Duration
	cacheFor time.Duration
	logger   *slog.Logger

	mu      sync.Mutex
	down    []bool        // whether the last check found each group unreachable
	last    Report        // the result of the last check
	endedAt time.Time     // when the last check ended; zero before the first
	running chan struct{} // closed when the check in flight ends; nil when none runs
}

// A group is one store value and the roles it plays.
type group struct {
	pinger Pinger
	roles  []string
}

// New returns a Checker of stores. A store value may be given in several roles; it is
// pinged once per check. With no stores the Checker is always ready. opts may be nil.
func New(stores []Store, opts *Options) (*Checker, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Timeout < 0:
		return nil, fmt.Errorf("health: Options.Timeout is %v; give a positive duration, or 0 for the default", o.Timeout)
	case o.Timeout == 0:
		o.Timeout = DefaultTimeout
	}
	switch {
	case o.CacheFor < 0:
		return nil, fmt.Errorf("health: Options.CacheFor is %v; give a positive duration, or 0 for the default", o.CacheFor)
	case o.CacheFor == 0:
		o.CacheFor = DefaultCacheFor
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Checker{timeout: o.Timeout, cacheFor: o.CacheFor, logger: o.Logger}
	roles := map[string]bool{}
	for i, s := range stores {
		if err := checkRole(s.Role); err != nil {
			return nil, fmt.Errorf("health: store %d: %w", i, err)
		}
		if roles[s.Role] {
			return nil, fmt.Errorf("health: two stores have the role %q; give each its own", s.Role)
		}
		roles[s.Role] = true
		if s.Pinger == nil || reflect.ValueOf(s.Pinger).Kind() == reflect.Pointer && reflect.ValueOf(s.Pinger).IsNil() {
			return nil, fmt.Errorf("health: the store of role %q is nil", s.Role)
		}
		j := c.find(s.Pinger)
		if j >= 0 {
			c.groups[j].roles = append(c.groups[j].roles, s.Role)
		} else {
			j = len(c.groups)
			c.groups = append(c.groups, group{pinger: s.Pinger, roles: []string{s.Role}})
		}
		c.roles, c.groupOf = append(c.roles, s.Role), append(c.groupOf, j)
	}
	c.down = make([]bool, len(c.groups))
	return c, nil
}

// checkRole returns an error unless role is a valid [Store.Role].
func checkRole(role string) error {
	if role == "" || len(role) > MaxRole {
		return fmt.Errorf("role %q: give 1 to %d bytes", role, MaxRole)
	}
	for _, r := range role {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', strings.ContainsRune(" -_./", r):
		default:
			return fmt.Errorf("role %q: use ASCII letters, digits, spaces, '-', '_', '.' and '/'", role)
		}
	}
	return nil
}

// find returns the index of the group of p, or -1. Only pointers are compared: any
// other value could be incomparable, or equal to another store without being it.
func (c *Checker) find(p Pinger) int {
	if reflect.ValueOf(p).Kind() != reflect.Pointer {
		return -1
	}
	return slices.IndexFunc(c.groups, func(g group) bool {
		return reflect.ValueOf(g.pinger).Kind() == reflect.Pointer && g.pinger == p
	})
}

// Check returns whether every store is reachable: the result of the last check if it
// ended less than [Options.CacheFor] ago, else that of the check in flight, which it
// starts if none runs. The check is not the caller's: it runs on a context of its own
// (ctx's values, without its cancellation), so that a caller that gives up does not
// fail the check for the others. Check returns ctx's error, and no Report, if ctx ends
// before the check does.
func (c *Checker) Check(ctx context.Context) (Report, error) {
	c.mu.Lock()
	if !c.endedAt.IsZero() && time.Since(c.endedAt) < c.cacheFor {
		r := c.last
		c.mu.Unlock()
		return r, nil
	}
	done := c.running
	if done == nil {
		done = make(chan struct{})
		c.running = done
		go c.check(context.WithoutCancel(ctx), done)
	}
	c.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return Report{}, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, nil
}

// check pings every group in parallel, each bounded by the timeout, records the
// result, logs the groups whose state changed and closes done.
func (c *Checker) check(ctx context.Context, done chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(c.groups)) // a ping that returns late never blocks
	for i, g := range c.groups {
		go func() { results <- result{i, ping(ctx, g.pinger)} }()
	}
	errs := make([]error, len(c.groups))
	for i := range errs {
		errs[i] = errNoAnswer
	}
wait:
	for range c.groups {
		select {
		case r := <-results:
			errs[r.i] = r.err
		case <-ctx.Done():
			break wait
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	r := Report{Ready: true}
	for i, role := range c.roles {
		if errs[c.groupOf[i]] != nil {
			r.Ready = false
			r.Unreachable = append(r.Unreachable, role)
		}
	}
	for i, g := range c.groups {
		down := errs[i] != nil
		switch {
		case down && !c.down[i]:
			err := errs[i]
			if errors.Is(err, errNoAnswer) {
				err = fmt.Errorf("%w within %v", err, c.timeout)
			}
			c.logger.Warn("health: a store is not reachable", "roles", g.roles, "error", err)
		case !down && c.down[i]:
			c.logger.Info("health: a store is reachable again", "roles", g.roles)
		}
		c.down[i] = down
	}
	c.last, c.endedAt, c.running = r, time.Now(), nil
	close(done)
}

// errNoAnswer is the error of a ping that did not return before its timeout.
var errNoAnswer = errors.New("no answer")

// ping calls p.Ping, turning a panic into an error.
func ping(ctx context.Context, p Pinger) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the ping panicked: %v", v)
		}
	}()
	return p.Ping(ctx)
}

// Live returns the liveness handler (/healthz): 200 {"status":"ok"} to every GET and
// HEAD, for as long as the process serves HTTP.
func (c *Checker) Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed(w, r) {
			return
		}
		answer(w, http.StatusOK, answerBody{Status: "ok"})
	})
}

// Ready returns the readiness handler (/readyz): 200 {"status":"ready"} when every
// store is reachable ([Checker.Check]), else 503 with the roles of those that are not
// and a message naming them (see the package documentation).
func (c *Checker) Ready() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed(w, r) {
			return
		}
		rep, err := c.Check(r.Context())
		switch {
		case err != nil: // the client is gone
			answer(w, http.StatusServiceUnavailable, answerBody{Status: "unavailable", Message: "not ready: the check did not end"})
		case rep.Ready:
			answer(w, http.StatusOK, answerBody{Status: "ready"})
		default:
			answer(w, http.StatusServiceUnavailable, answerBody{Status: "unavailable", Unreachable: rep.Unreachable,
				Message: message(rep.Unreachable)})
		}
	})
}

// answerBody is the JSON of an answer.
type answerBody struct {
	Status      string   `json:"status"`
	Unreachable []string `json:"unreachable,omitempty"`
	Message     string   `json:"message,omitempty"`
}

// message says which stores are not reachable: "not ready: the keys store is not
// reachable", "... the keys and ledger stores are ...", "... the keys, ledger and
// rates stores are ...".
func message(roles []string) string {
	switch len(roles) {
	case 0:
		return ""
	case 1:
		return "not ready: the " + roles[0] + " store is not reachable"
	default:
		return "not ready: the " + strings.Join(roles[:len(roles)-1], ", ") + " and " + roles[len(roles)-1] +
			" stores are not reachable"
	}
}

// allowed answers 405 to a method other than GET and HEAD, and reports whether the
// request may go on.
func allowed(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	answer(w, http.StatusMethodNotAllowed, answerBody{Status: "error", Message: "use GET or HEAD"})
	return false
}

// answer writes body as JSON with status, never to be cached.
func answer(w http.ResponseWriter, status int, body answerBody) {
	b, _ := json.Marshal(body) // strings only: never fails
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
