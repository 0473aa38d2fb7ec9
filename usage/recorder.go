package usage

import (
	"context"
	"errors"
	"fmt"
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
	// Retention is how long the buckets of each resolution are kept; see
	// [Retention] for the defaults.
	Retention Retention
	// PruneInterval is how often the recorder deletes the buckets older than their
	// retention: once at NewRecorder, then at this interval. Any number of instances
	// may prune the same store. The default is [DefaultPruneInterval]; a negative
	// value turns the schedule off (call [Recorder.Prune] yourself then).
	// [Recorder.Close] stops it.
	PruneInterval time.Duration
	// Now returns the current time, for the prune: give the service's clock
	// (tollgate.Options.Now), so that the retention counts on the clock the buckets
	// were recorded by. The default is time.Now.
	Now func() time.Time
	// Logger receives the flushes and prunes that failed, at WARN. The default is
	// slog.Default().
	Logger *slog.Logger
}

// Retention is how long the usage statistics keep the buckets of each resolution.
// A zero field is its default, which keeps a little more than the longest range a
// query of that interval may cover (see [Query]): minute buckets for 2 days, hour
// buckets for 32 days, day buckets for 400 days. A negative field keeps that
// resolution's buckets for ever.
type Retention struct {
	Minute, Hour, Day time.Duration
}

// The default [Retention], and the default [RecorderOptions].PruneInterval.
const (
	DefaultMinuteRetention = 2 * 24 * time.Hour
	DefaultHourRetention   = 32 * 24 * time.Hour
	DefaultDayRetention    = MaxDayRange
	DefaultPruneInterval   = time.Hour
)

// of returns how long the buckets of res are kept; negative for ever.
func (r Retention) of(res Resolution) time.Duration {
	keep, def := r.Day, DefaultDayRetention
	switch res {
	case Minute:
		keep, def = r.Minute, DefaultMinuteRetention
	case Hour:
		keep, def = r.Hour, DefaultHourRetention
	}
	if keep == 0 {
		return def
	}
	return keep
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

	retention Retention
	now       func() time.Time

	stop, stopPrune func()
	closeOnce       sync.Once
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

// NewRecorder returns a Recorder that flushes to s, and starts its background flush
// and prune: by default it deletes the buckets older than their retention from s at
// once and then every hour (see [RecorderOptions].PruneInterval; a negative one keeps
// everything). opts may be nil. Stop it with [Recorder.Close].
func NewRecorder(s Store, opts *RecorderOptions) (*Recorder, error) {
	if s == nil {
		return nil, errors.New("usage: NewRecorder needs a Store")
	}
	if opts == nil {
		opts = &RecorderOptions{}
	}
	r := &Recorder{store: s, log: opts.Logger, maxPending: opts.MaxPending, timeout: opts.FlushTimeout,
		retention: opts.Retention, now: opts.Now}
	if r.now == nil {
		r.now = time.Now
	}
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
	if interval := opts.PruneInterval; interval >= 0 {
		if interval == 0 {
			interval = DefaultPruneInterval
		}
		r.stopPrune = every.StartNow(interval, every.Chore{Do: r.Prune,
			Failed: "tollgate: cannot prune the usage statistics; the next prune tries again",
			Done:   "tollgate: pruned the usage buckets older than their retention",
		}.Run(r.log))
	}
	return r, nil
}

// Prune deletes the buckets older than their retention ([RecorderOptions].Retention)
// now, and returns how many it deleted. The background prune calls it every
// PruneInterval.
func (r *Recorder) Prune(ctx context.Context) (int64, error) {
	now, total := r.now(), int64(0)
	for _, res := range Resolutions {
		keep := r.retention.of(res)
		if keep < 0 {
			continue
		}
		n, err := r.store.Prune(ctx, res, now.Add(-keep))
		total += n
		if err != nil {
			return total, fmt.Errorf("usage: pruning the %s buckets: %w", res, err)
		}
	}
	return total, nil
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

// Close stops the background flush and prune, and flushes what is left, within ctx. Records made
// after Close are kept until a [Recorder.Flush].
func (r *Recorder) Close(ctx context.Context) error {
	var err error
	r.closeOnce.Do(func() {
		for _, stop := range []func(){r.stop, r.stopPrune} {
			if stop != nil {
				stop()
			}
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
