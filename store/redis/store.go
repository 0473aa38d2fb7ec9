package redis

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/groupcommit"
	"github.com/tollgate-dev/tollgate/store"
)

// Store keeps Tollgate's state in Redis: accounts and keys ([auth.KeyStore] and
// [driver.KeyChecker]), balances ([driver.Ledger]), rate limits
// ([driver.RateLimiter]) and concurrency leases ([driver.ConcurrencyLimiter]), and
// admits a call in one script ([driver.Admitter]). Hand the one *Store to every role it
// should play; the Meter then admits with one round trip and settles with another. See
// the package documentation for the key layout, the clocks and durability.
//
// A Store is safe for concurrent use. It does not own the client: the host creates it,
// configures its pool and timeouts, and closes it.
type Store struct {
	c           goredis.UniversalClient
	prefix      string
	serverClock bool
	retention   string          // milliseconds, for PX
	open        string          // milliseconds, for PX
	shards      []string        // the hash tags of the shards of the index of expiring accounts
	token       string          // names this Store's sweeps in the shards' leases
	scan        int             // the most accounts a page of Accounts examines; 0 is accountScan
	jscan       int             // the most entries of a shard of the index of journals a claim reads at once; 0 is journalScan
	journaled   journalAccounts // the accounts of the journal's entries this Store recorded and claimed

	// batches pipelines concurrent admissions and closings; nil when Options.Batch
	// is 1.
	batches *groupcommit.Combiner[scriptCall, scriptReply]

	// repl makes the writes wait for replicas; nil when Options.Replicas is 0.
	repl *replication
}

// Interface guards.
var (
	_ auth.KeyStore             = (*Store)(nil)
	_ auth.KeyExpiries          = (*Store)(nil)
	_ driver.KeyChecker         = (*Store)(nil)
	_ driver.Ledger             = (*Store)(nil)
	_ driver.RateLimiter        = (*Store)(nil)
	_ driver.ConcurrencyLimiter = (*Store)(nil)
	_ driver.Admitter           = (*Store)(nil)
	_ driver.Sweeper            = (*Store)(nil)
)

// Options configures a [Store]. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Prefix begins the name of every key the Store uses, followed by a colon, so that
	// several deployments (or tests) can share one Redis. It must not contain braces,
	// which would change the keys' hash tags. The default is "tollgate".
	Prefix string

	// Retention is how long a settled reservation and an admission without credits
	// are remembered, so that a replay of the same request id changes nothing. After
	// it, a replay is no longer recognised (a replayed reservation is charged again).
	// Redis holds one key of about 200 bytes per remembered request, so memory grows
	// with calls per second times Retention (see the package documentation). The
	// default is [DefaultRetention]. Open reservations are kept until they are
	// settled, at most [OpenReservationTTL]; adjustments (an operator's grants, sent
	// again with their idempotency key, and changes of plan), which are few, are
	// remembered for OpenReservationTTL too.
	Retention time.Duration

	// CallerClock makes rate limits, leases, reservation deadlines and the lapse of
	// grants run on the time the caller passes (the now arguments and Step.Now)
	// instead of the Redis server's clock. The
	// default, the server's clock, keeps instances whose clocks disagree consistent;
	// the caller's clock is for tests that script time. Every instance sharing a
	// Prefix must use the same clock. Credit periods always come from the caller.
	CallerClock bool

	// Batch is the most admissions and closings sent to Redis in one pipeline. A call
	// that finds no pipeline in flight on its lane is sent at once (with the calls of
	// its lane that the goroutines ready to run make as it lets them go first); calls that
	// arrive while one is in flight are sent together when it returns, so a busy
	// service makes far fewer round trips and system calls (on both sides) and an idle
	// one pays no delay. The admissions (or closings) of one account in a pipeline are
	// one run of their script, which reads the account's state once for all of them;
	// each is performed exactly as it would be alone, and gets its own answer. The
	// default is [DefaultBatch]; 1 sends every call on its own.
	Batch int

	// Replicas makes every write that the Store acknowledges and that a failover
	// must not lose wait, before it is acknowledged, until that many replicas of its
	// master have it (Redis's WAIT, on the connection that made the write): the
	// admissions and closings of calls, the ledger's writes (openings, reservations,
	// settlements, adjustments), the writes of accounts and keys (creations, updates,
	// rotations, revocations, deletions, and their indexes), idempotency records and
	// ended sessions. A write that fewer replicas acknowledged within WaitTimeout
	// fails with an error that wraps both [ErrNotReplicated] and
	// store.ErrUnavailable: the master took it, so it may or may not outlive a
	// failover, and the call is answered as unavailable (an admission charges
	// nothing; its reservation is voided at its deadline). Rate limits and leases
	// taken on their own, reads, and the sweeps' voids do not wait. A failover then
	// loses no acknowledged write if the replica it promotes is one that
	// acknowledged it, which is certain only when Replicas is the number of
	// replicas of each master; and a master left with fewer replicas than Replicas
	// (as a failover leaves the replica it promotes, until the failed node is back as
	// its replica) refuses every write as unavailable. The client must be a
	// *goredis.Client (of one server or of a failover group) or a
	// *goredis.ClusterClient. The default, 0, does not wait: Redis replicates
	// asynchronously. See docs/redis.md, "Waiting for replicas".
	Replicas int

	// WaitTimeout is the longest a write waits for Replicas replicas. It must be
	// shorter than the client's ReadTimeout, which bounds the reply of the wait.
	// The default is [DefaultWaitTimeout].
	WaitTimeout time.Duration
}

// DefaultBatch is the default [Options.Batch].
const DefaultBatch = 32

// lanes is the number of pipelines that may be in flight at once (see
// [Options.Batch]). A call takes the lane of its first key, so that the calls of one
// account, which are merged into one run of their script when they go out together,
// do go out together; the admissions and the closings of an account (whose first keys
// differ) take lanes of their own, most often different ones, so that each is sent as
// soon as the last of its kind returns.
const lanes = 4

// laneOf returns the lane of a call whose first key is key: FNV-1a of the key.
func laneOf(key string) int { return int(fnv32(key) % lanes) }

// DefaultRetention is the default [Options.Retention]: long enough for any retry of a
// call or of an operator's adjustment, short enough that 1,000 calls a second keep
// about 120 MB of markers.
const DefaultRetention = 10 * time.Minute

// OpenReservationTTL bounds how long the marker of an open (or voided) reservation is
// kept. A reservation is settled when its call ends, or voided at its deadline,
// seconds or minutes later; the marker outlives that by far, so that a sweep still
// finds what to give back after every instance was down for a long time, and a
// settlement across a renewal is still recognised.
const OpenReservationTTL = 35 * 24 * time.Hour

// New returns a Store over client, which may be a *goredis.Client, a
// *goredis.ClusterClient or a failover client. opts may be nil. New does not contact
// Redis; the scripts are loaded on first use (EVALSHA, falling back to EVAL once).
func New(client goredis.UniversalClient, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redis: New needs a client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	var err error
	if o.Prefix, err = checkPrefix(o.Prefix); err != nil {
		return nil, err
	}
	switch {
	case o.Retention < 0:
		return nil, fmt.Errorf("redis: retention %v is negative", o.Retention)
	case o.Retention == 0:
		o.Retention = DefaultRetention
	case o.Retention < time.Millisecond:
		o.Retention = time.Millisecond
	}
	switch {
	case o.Batch < 0:
		return nil, fmt.Errorf("redis: batch %d is negative", o.Batch)
	case o.Batch == 0:
		o.Batch = DefaultBatch
	}
	s := &Store{
		c:           client,
		prefix:      o.Prefix,
		serverClock: !o.CallerClock,
		retention:   strconv.FormatInt(o.Retention.Milliseconds(), 10),
		open:        strconv.FormatInt(OpenReservationTTL.Milliseconds(), 10),
		shards:      shardTags(),
		token:       newToken(),
	}
	if s.repl, err = newReplication(client, o.Prefix, o.Replicas, o.WaitTimeout); err != nil {
		return nil, err
	}
	if o.Batch > 1 {
		s.batches = groupcommit.New(o.Batch, s.pipeline)
	}
	return s, nil
}

// checkPrefix returns the prefix of every key: p, or "tollgate" for "". It refuses
// one with braces.
func checkPrefix(p string) (string, error) {
	if p == "" {
		return "tollgate", nil
	}
	if strings.ContainsAny(p, "{}") {
		return "", fmt.Errorf("redis: prefix %q: braces would change the keys' hash tags", p)
	}
	return p, nil
}

// Key names. Every key of an account is <prefix>:{<tag>}:<kind>, where the tag is the
// account id, so that all of them hash to one Cluster slot. An id that could break the
// tag (empty, or containing '}') or that begins with '~' is written as '~' and its
// bytes in hexadecimal instead, so that distinct ids never share keys.
func tagOf(id string) string {
	if id != "" && id[0] != '~' && !strings.Contains(id, "}") {
		return id
	}
	return "~" + hex.EncodeToString([]byte(id))
}

// account returns the names of one account's keys.
func (s *Store) account(id string) acctKeys {
	return acctKeys(s.prefix + ":{" + tagOf(id) + "}:")
}

type acctKeys string

// The kinds of an account's keys: a key's name is the account's prefix (acctKeys)
// followed by its kind.
const (
	kindRecord  = "acct"
	kindKeys    = "keys"
	kindKorder  = "korder"
	kindKrev    = "krev"
	kindTat     = "tat"
	kindLeases  = "lease"
	kindBalance = "bal"
	kindUsage   = "use"
	kindOpen    = "open"
	kindMarkers = "r:" // followed by a request id in hexadecimal: the request's marker
)

func (a acctKeys) record() string  { return string(a) + kindRecord }
func (a acctKeys) keys() string    { return string(a) + kindKeys }
func (a acctKeys) korder() string  { return string(a) + kindKorder }
func (a acctKeys) krev() string    { return string(a) + kindKrev }
func (a acctKeys) tat() string     { return string(a) + kindTat }
func (a acctKeys) leases() string  { return string(a) + kindLeases }
func (a acctKeys) balance() string { return string(a) + kindBalance }
func (a acctKeys) usage() string   { return string(a) + kindUsage }
func (a acctKeys) open() string    { return string(a) + kindOpen }
func (a acctKeys) markers() string { return string(a) + kindMarkers }
func (a acctKeys) marker(r driver.RequestID) string {
	return a.markers() + r.String()
}

// callKeys returns the names of the account's keys of the given kinds followed by the
// marker of request r: the keys of a call of the hot path (an admission, a closing),
// built in one allocation rather than one per key.
func (a acctKeys) callKeys(r driver.RequestID, kinds ...string) []string {
	var hexID [2 * len(driver.RequestID{})]byte
	hex.Encode(hexID[:], r[:])
	n := (len(kinds)+1)*len(a) + len(kindMarkers) + len(hexID)
	for _, k := range kinds {
		n += len(k)
	}
	var b strings.Builder
	b.Grow(n)
	for _, k := range kinds {
		b.WriteString(string(a))
		b.WriteString(k)
	}
	b.WriteString(string(a))
	b.WriteString(kindMarkers)
	b.Write(hexID[:])
	all := b.String()
	names := make([]string, len(kinds)+1)
	for i, k := range kinds {
		names[i], all = all[:len(a)+len(k)], all[len(a)+len(k):]
	}
	names[len(kinds)] = all
	return names
}

// The global indexes, outside any account's slot, used only by single-key commands and
// scripts of one key.
func (s *Store) keyIDIndex(id string) string  { return s.prefix + ":kid:" + id }
func (s *Store) hashIndex(h auth.Hash) string { return s.prefix + ":h:" + h.String() }
func (s *Store) revoked() string              { return s.prefix + ":revoked" }

// A scriptCall is a script to run with its keys and arguments, or, with no script, a
// plain command (its name and arguments in args); a scriptReply its outcome.
//
// The scripts of the hot path (admitScript, closeScript) take steps: the first shared
// keys are the account's, then each step has one key of its own (its marker) and a
// block of arguments. Calls of one such script on one account that go out in one
// pipeline are sent as a single run of the script, one step each (see [Store.pipeline]);
// a call alone is a run of one step.
type (
	scriptCall struct {
		sc     *goredis.Script
		keys   []string
		args   []any
		shared int // the number of keys shared by the steps of a run; 0: not a step
	}
	scriptReply struct {
		val any
		err error
	}
)

// key returns the call's first key: a script's first, or a plain command's (its first
// argument after the name).
func (c scriptCall) key() string {
	if c.sc != nil {
		return c.keys[0]
	}
	k, _ := c.args[1].(string)
	return k
}

// runBatched runs a call of the hot path (admission, closing) in a pipeline with the
// calls that arrive at the same time (see [Options.Batch]), and returns its own reply.
func (s *Store) runBatched(ctx context.Context, c scriptCall) (any, error) {
	if s.batches == nil {
		return s.runWrite(ctx, c)
	}
	r, err := s.batches.Do(ctx, strconv.Itoa(laneOf(c.key())), c)
	if err != nil {
		return nil, err
	}
	return r.val, r.err
}

// stepReply returns the reply of step i of a run of n steps: a run of one step
// answers the step's reply, a run of several the list of its steps' replies, in order
// (see lua/admit.lua). A reply of another shape is returned whole, for the step's
// decoding to report.
func stepReply(v any, i, n int) any {
	if n == 1 {
		return v
	}
	if r := asSlice(v); len(r) == n {
		return r[i]
	}
	return v
}

// A run is a call sent in a pipeline: a batch's call, or the steps of several of its
// calls (of one script on one account) merged into one call; of lists those calls'
// places in the batch, and params the parameters of its last step.
type run struct {
	call   scriptCall
	of     []int
	params string
}

// runs merges the steps of a batch's calls into runs, one per script and account, in
// the order of their first call; other calls run as they are. Steps of one account
// keep their order. Runs of different accounts, or of different scripts, touch
// different keys or are concurrent calls that could have run in either order, so
// their order does not matter. A step whose parameters are those of the step before
// it in its run passes an empty string in their place (see lua/admit.lua): Redis
// then neither receives nor interns them again.
func runs(calls []scriptCall) []run {
	out := make([]run, 0, len(calls))
next:
	for i, c := range calls {
		if c.shared > 0 {
			for j := range out {
				r := &out[j]
				if r.call.sc == c.sc && r.call.shared == c.shared && r.call.keys[0] == c.keys[0] {
					if len(r.of) == 1 {
						// The first call's slices belong to its caller: copy them.
						r.call.keys = slices.Clone(r.call.keys)
						r.call.args = slices.Clone(r.call.args)
					}
					r.call.keys = append(r.call.keys, c.keys[c.shared:]...)
					member, params := c.args[0], c.args[1].(string)
					if params == r.params {
						r.call.args = append(r.call.args, member, "")
					} else {
						r.call.args = append(r.call.args, member, params)
						r.params = params
					}
					r.of = append(r.of, i)
					continue next
				}
			}
		}
		r := run{call: c, of: []int{i}}
		if c.shared > 0 {
			r.params = c.args[1].(string)
		}
		out = append(out, r)
	}
	return out
}

// pipeline runs a batch of calls of the hot path (see [Options.Batch]), as
// pipelineRuns does, waiting for replicas with Options.Replicas.
func (s *Store) pipeline(ctx context.Context, _ string, calls []scriptCall) ([]scriptReply, error) {
	return s.pipelineRuns(ctx, calls, s.repl != nil), nil
}

// pipelineRuns runs a batch of calls: as runs (see [runs]); one run alone, as runCall
// does; several together, in one pipeline (scripts as EVALSHAs), with a script Redis
// did not have yet, or one refused while its Cluster slot moves, sent again on its own
// as runCall sends it (it did not run). A failed round trip fails every call of the
// batch, in doubt, as a lone call's would. With durable, the runs are sent as
// replication.do sends them, and each reply waits for the replicas.
func (s *Store) pipelineRuns(ctx context.Context, calls []scriptCall, durable bool) []scriptReply {
	rs := runs(calls)
	out := make([]scriptReply, len(calls))
	if durable {
		merged := make([]scriptCall, len(rs))
		for i, r := range rs {
			merged[i] = r.call
		}
		for i, reply := range s.repl.do(ctx, merged) {
			rs[i].deliver(out, reply.val, reply.err)
		}
		return out
	}
	if len(rs) == 1 {
		v, err := s.runCall(ctx, rs[0].call)
		rs[0].deliver(out, v, err)
		return out
	}
	cmds := make([]*goredis.Cmd, len(rs))
	// The pipeline's error is that of its first failed command; each command
	// carries its own (a lost connection fails them all).
	s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, r := range rs {
			if r.call.sc == nil {
				cmds[i] = p.Do(ctx, r.call.args...)
			} else {
				cmds[i] = r.call.sc.EvalSha(ctx, p, r.call.keys, r.call.args...)
			}
		}
		return nil
	})
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if err != nil && (goredis.HasErrorPrefix(err, "NOSCRIPT") || slotMoving(err)) {
			v, err = s.runCall(ctx, rs[i].call)
		}
		rs[i].deliver(out, v, err)
	}
	return out
}

// deliver gives each call of the run its outcome: its step's reply, or the run's
// error.
func (r run) deliver(out []scriptReply, v any, err error) {
	for j, i := range r.of {
		switch {
		case err != nil:
			out[i] = scriptReply{nil, err}
		case r.call.shared == 0:
			out[i] = scriptReply{v, nil}
		default:
			out[i] = scriptReply{stepReply(v, j, len(r.of)), nil}
		}
	}
}

// runCall runs one call on its own: the script as run does (a step as a run of one,
// whose reply is the step's), or the plain command.
func (s *Store) runCall(ctx context.Context, c scriptCall) (any, error) {
	if c.sc == nil {
		return s.c.Do(ctx, c.args...).Result()
	}
	return s.run(ctx, c.sc, c.keys, c.args...)
}

// runWrite runs one call that writes what a failover must not lose: as runCall does,
// or, with Options.Replicas, as replication.do does, waiting for the replicas.
func (s *Store) runWrite(ctx context.Context, c scriptCall) (any, error) {
	if s.repl == nil {
		return s.runCall(ctx, c)
	}
	r := s.repl.do(ctx, []scriptCall{c})[0]
	return r.val, r.err
}

// run runs a script: EVALSHA, and EVAL if Redis does not have it yet; again while a
// Redis Cluster refuses it because its slot is moving (see [whileSlotMoves]).
func (s *Store) run(ctx context.Context, sc *goredis.Script, keys []string, args ...any) (any, error) {
	return whileSlotMoves(ctx, func() (any, error) { return sc.Run(ctx, s.c, keys, args...).Result() })
}

// write runs a script that writes what a failover must not lose: as run does, or,
// with Options.Replicas, waiting for the replicas (see [Store.runWrite]).
func (s *Store) write(ctx context.Context, sc *goredis.Script, keys []string, args ...any) (any, error) {
	if s.repl == nil {
		return s.run(ctx, sc, keys, args...)
	}
	return s.runWrite(ctx, scriptCall{sc: sc, keys: keys, args: args})
}

// writeCmd sends a command of one key (its name, the key, its arguments) that writes
// what a failover must not lose: as it is, or, with Options.Replicas, waiting for the
// replicas. A reply of nothing is goredis.Nil.
func (s *Store) writeCmd(ctx context.Context, args ...any) (any, error) {
	if s.repl == nil {
		return s.c.Do(ctx, args...).Result()
	}
	return s.runWrite(ctx, scriptCall{args: args})
}

// fieldSep separates the fields of a step's parameters, the one string a step of
// admitScript or closeScript passes besides its member (see lua/admit.lua and
// lua/close.lua). It is byte 30, which no number holds; the one field that could hold
// it, a key id, is given by its length and the bytes that follow.
const fieldSep = '\x1e'

// appendFields appends each number in decimal, followed by fieldSep.
func appendFields(p []byte, ns ...int64) []byte {
	for _, n := range ns {
		p = strconv.AppendInt(p, n, 10)
		p = append(p, fieldSep)
	}
	return p
}

// appendList appends the APIs joined by apiSeparator.
func appendList(p []byte, apis []string) []byte {
	for i, api := range apis {
		if i > 0 {
			p = append(p, apiSeparator)
		}
		p = append(p, api...)
	}
	return p
}

// appendClock appends the clock fields of a step's parameters: the mode, and the
// caller's now in Unix seconds and nanoseconds (empty on the server's clock).
func (s *Store) appendClock(p []byte, now time.Time) []byte {
	if s.serverClock {
		return append(p, 's', fieldSep, fieldSep, fieldSep)
	}
	p = append(p, 'c', fieldSep)
	return appendFields(p, now.Unix(), int64(now.Nanosecond()))
}

// memberOf returns the request id of a request's marker key, in hexadecimal: the
// member by which the request's lease and reservation are known.
func memberOf(marker string) string {
	return marker[len(marker)-2*len(driver.RequestID{}):]
}

// holdArg returns a reservation's hold, Expires-Now, in microseconds.
func holdArg(r *driver.Reservation) string {
	return strconv.FormatInt(r.Expires.Sub(r.Now).Microseconds(), 10)
}

// clock returns the clock arguments of a script: the mode and the caller's now.
func (s *Store) clock(now time.Time) (string, int64, int64) {
	if s.serverClock {
		return "s", 0, 0
	}
	return "c", now.Unix(), int64(now.Nanosecond())
}

// fail wraps an error of the client. A canceled context is reported as such; any
// other failure (no connection, a timeout, a Redis error) wraps store.ErrUnavailable,
// and the context's error too if it ended.
func fail(ctx context.Context, err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	ctxErr := ctx.Err()
	if d, ok := ctx.Deadline(); ok && ctxErr == nil && !time.Now().Before(d) {
		// The read's deadline, taken from the context's, can pass before the
		// context's own timer marks it done.
		ctxErr = context.DeadlineExceeded
	}
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(ctxErr, context.Canceled):
		if !errors.Is(err, context.Canceled) {
			return fmt.Errorf("redis: %s: %w (%w)", what, context.Canceled, err)
		}
		return fmt.Errorf("redis: %s: %w", what, err)
	case ctxErr != nil && !errors.Is(err, ctxErr):
		return fmt.Errorf("redis: %s: %w: %w (%w)", what, store.ErrUnavailable, ctxErr, err)
	}
	return fmt.Errorf("redis: %s: %w: %w", what, store.ErrUnavailable, err)
}

// errReply reports a reply of a script that does not have the expected shape.
func errReply(what string, reply any) error {
	return fmt.Errorf("redis: %s: unexpected reply %v: %w", what, reply, store.ErrUnavailable)
}

// Reply decoding. Scripts answer integers and strings.

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// ms returns d in whole milliseconds, rounded up.
func ms(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
