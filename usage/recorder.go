package usage

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tollgate-dev/tollgate/internal/every"
)

// RecorderOptions configures a [Recorder]. The zero value is the default.
type RecorderOptions struct {
	// FlushInterval is how often the recorder flushes in the background. The default
	// is [DefaultFlushInterval]; a negative value turns the background flush off (call
	// [Recorder.Flush] yourself then).
	FlushInterval time.Duration
	// FlushTimeout bounds one background flush. The default is [DefaultFlushTimeout].
	FlushTimeout time.Duration
	// MaxPending is the most rows kept for the next flush when the store refuses one:
	// past it the oldest rows are dropped and counted ([Recorder.Dropped]). The default
	// is [DefaultMaxPending].
	MaxPending int
	// Logger receives the flushes that failed, at WARN. The default is slog.Default().
	Logger *slog.Logger
}

// Defaults of [RecorderOptions].
const (
	DefaultFlushInterval = 10 * time.Second
	DefaultFlushTimeout  = 10 * time.Second
	DefaultMaxPending    = 100_000
)

// numShards is the number of independently locked maps records are summed in; a record
// goes to a random one, so that calls on many cores seldom wait for each other.
const numShards = 16

// A Recorder sums records in process into minute rows and flushes them to a [Store] in
// batches: every FlushInterval in the background, on [Recorder.Flush] and on
// [Recorder.Close]. [Recorder.Record] takes a lock of one of several shards and updates
// a map entry; it never waits for the store.
//
// A flush the store refuses is kept and added to the next one, up to MaxPending rows;
// past that, the oldest rows are dropped and their calls counted in
// [Recorder.Dropped]. A flush whose outcome is unknown (a timeout after the store
// committed it) is retried too, so such a failure may count its calls twice: usage is
// statistics, and the ledger stays the record of money.
//
// A Recorder is safe for concurrent use.
type Recorder struct {
	store      Store
	log        *slog.Logger
	maxPending int
	timeout    time.Duration
	shards     [numShards]shard

	flushMu sync.Mutex // serializes flushes; guards pending
	pending []Row
	npend   atomic.Int64
	dropped atomic.Int64

	stop      func()
	closeOnce sync.Once
}

// A shard is one of the maps records are summed in.
type shard struct {
	shardState
	_ [(cacheLine - unsafe.Sizeof(shardState{})%cacheLine) % cacheLine]byte // a cache line (or more) of its own
}

// cacheLine is the size of a cache line on the processors Tollgate runs on.
const cacheLine = 64

type shardState struct {
	mu   sync.Mutex
	rows map[group]*Row
	// last is the row of the shard's last record, and lastG its group: calls come in
	// runs of the same account, key and API, and comparing groups costs less than
	// hashing one.
	last  *Row
	lastG group
}

// NewRecorder returns a Recorder that flushes to s, and starts its background flush.
// opts may be nil. Stop it with [Recorder.Close].
func NewRecorder(s Store, opts *RecorderOptions) (*Recorder, error) {
	if s == nil {
		return nil, errors.New("usage: NewRecorder needs a Store")
	}
	if opts == nil {
		opts = &RecorderOptions{}
	}
	r := &Recorder{store: s, log: opts.Logger, maxPending: opts.MaxPending, timeout: opts.FlushTimeout}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.maxPending <= 0 {
		r.maxPending = DefaultMaxPending
	}
	if r.timeout <= 0 {
		r.timeout = DefaultFlushTimeout
	}
	for i := range r.shards {
		r.shards[i].rows = make(map[group]*Row)
	}
	interval := opts.FlushInterval
	if interval == 0 {
		interval = DefaultFlushInterval
	}
	if interval > 0 {
		r.stop = r.flushEvery(interval)
	}
	return r, nil
}

// Record counts one record. It never blocks on the store.
func (r *Recorder) Record(rec Record) {
	secs := rec.At.Unix()
	secs -= ((secs % 60) + 60) % 60
	g := group{bucket: secs * int64(time.Second), account: rec.Account, key: rec.Key,
		api: rec.API, channel: rec.Channel, outcome: rec.Outcome}
	sh := &r.shards[rand.Uint32()%numShards]
	sh.mu.Lock()
	row := sh.last
	if row == nil || g != sh.lastG {
		if row = sh.rows[g]; row == nil {
			row = &Row{Bucket: time.Unix(secs, 0).UTC(), Account: rec.Account, Key: rec.Key,
				API: rec.API, Channel: rec.Channel, Outcome: rec.Outcome, Last: rec.At}
			sh.rows[g] = row
		}
		sh.last, sh.lastG = row, g
	}
	row.Calls++
	row.Credits += rec.Credits
	if !rec.Refused {
		row.Latency.Observe(rec.Duration)
	}
	if rec.At.After(row.Last) {
		row.Last = rec.At
	}
	sh.mu.Unlock()
}

// Flush sends what was recorded, with what earlier flushes could not send, to the store
// in one [Store.Add]. On failure it keeps the rows for the next flush (up to
// MaxPending, see [Recorder]) and returns the store's error.
func (r *Recorder) Flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	rows := r.pending
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		taken := sh.rows
		if len(taken) == 0 {
			sh.mu.Unlock()
			continue
		}
		sh.rows = make(map[group]*Row, len(taken))
		sh.last, sh.lastG = nil, group{}
		sh.mu.Unlock()
		for _, row := range taken {
			rows = append(rows, *row)
		}
	}
	// A row no store can hold would make every flush fail: drop it now.
	valid := rows[:0]
	for i := range rows {
		if err := rows[i].Validate(); err != nil {
			r.dropped.Add(rows[i].Calls)
			r.log.WarnContext(ctx, "usage: dropped a row no store can hold", "account", rows[i].Account, "api", rows[i].API, "error", err)
			continue
		}
		valid = append(valid, rows[i])
	}
	rows = Rollup(valid, Minute)
	if len(rows) == 0 {
		r.pending = nil
		r.npend.Store(0)
		return nil
	}
	err := r.store.Add(ctx, rows)
	if err == nil {
		r.pending = nil
		r.npend.Store(0)
		return nil
	}
	if over := len(rows) - r.maxPending; over > 0 {
		// Rollup sorted the rows by bucket: the oldest go first.
		var calls int64
		for i := range rows[:over] {
			calls += rows[i].Calls
		}
		r.dropped.Add(calls)
		rows = rows[over:]
		r.log.WarnContext(ctx, "usage: dropped the oldest usage rows; the store has refused flushes for a while",
			"rows", over, "calls", calls, "kept", len(rows))
	}
	r.pending = rows
	r.npend.Store(int64(len(rows)))
	r.log.WarnContext(ctx, "usage: the store did not take a flush; retrying with the next one",
		"rows", len(rows), "error", err)
	return err
}

// Pending returns the number of rows kept from flushes the store refused.
func (r *Recorder) Pending() int { return int(r.npend.Load()) }

// Dropped returns the number of calls whose usage was dropped since the recorder
// started: rows past MaxPending while the store refused flushes, and rows no store
// can hold.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Close stops the background flush and flushes what is left, within ctx. Records made
// after Close are kept until a [Recorder.Flush].
func (r *Recorder) Close(ctx context.Context) error {
	var err error
	r.closeOnce.Do(func() {
		if r.stop != nil {
			r.stop()
		}
		err = r.Flush(ctx)
	})
	return err
}

// flushEvery flushes every interval until the returned function is called, which waits
// for a flush in progress to end.
func (r *Recorder) flushEvery(interval time.Duration) (stop func()) {
	return every.Start(interval, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		_ = r.Flush(ctx) // Flush logs its failures
	})
}
