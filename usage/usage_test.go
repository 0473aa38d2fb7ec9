package usage_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

var t0 = time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)

func TestBucketOf(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{usage.MinLatency - 1, 0},
		{usage.MinLatency, 1},
		{2*usage.MinLatency - 1, 4},
		{2 * usage.MinLatency, 5},
		{time.Hour, usage.NumBuckets - 1},
		{-time.Second, 0},
	} {
		if got := usage.BucketOf(tc.d); got != tc.want {
			t.Errorf("BucketOf(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	for i := range usage.NumBuckets {
		lo, hi := usage.BucketBounds(i)
		if usage.BucketOf(lo) != i || i < usage.NumBuckets-1 && usage.BucketOf(hi-1) != i {
			t.Errorf("bucket %d [%v, %v): BucketOf(lo) = %d, BucketOf(hi-1) = %d", i, lo, hi, usage.BucketOf(lo), usage.BucketOf(hi-1))
		}
	}
}

// Every quantile of a single duration in the covered range is within QuantileError.
func TestQuantileError(t *testing.T) {
	worst := 0.0
	for d := usage.MinLatency; d < 100*time.Second; d = d*103/100 + 1 {
		var h usage.Histogram
		h.Observe(d)
		got := h.Quantile(0.5)
		e := math.Abs(float64(got-d)) / float64(d)
		worst = max(worst, e)
		if e > usage.QuantileError+2e-5 { // bounds and estimates are whole nanoseconds: 2ns at 100µs
			t.Fatalf("Quantile of %v = %v: error %.4f, more than %.4f", d, got, e, usage.QuantileError)
		}
	}
	if worst < usage.QuantileError/2 {
		t.Errorf("worst error %.4f: the bound %.4f is far from tight, or the check saw no bucket edge", worst, usage.QuantileError)
	}
	var empty usage.Histogram
	if empty.Quantile(0.99) != 0 {
		t.Errorf("Quantile of an empty histogram = %v, want 0", empty.Quantile(0.99))
	}
}

func TestHistogramTrimmedRoundTrip(t *testing.T) {
	var h usage.Histogram
	h.Observe(time.Millisecond)
	h.Observe(3 * time.Second)
	tr := h.Trimmed()
	if len(tr) != usage.BucketOf(3*time.Second)+1 {
		t.Errorf("Trimmed has %d counts, want %d", len(tr), usage.BucketOf(3*time.Second)+1)
	}
	if usage.HistogramOf(tr) != h {
		t.Errorf("HistogramOf(Trimmed) differs from the histogram")
	}
	long := make([]int64, usage.NumBuckets+2)
	long[usage.NumBuckets+1] = 5
	if got := usage.HistogramOf(long); got[usage.NumBuckets-1] != 5 {
		t.Errorf("HistogramOf of too many counts: last bucket %d, want 5", got[usage.NumBuckets-1])
	}
}

// downStore is a memory store that a test can take down: its Add fails while down.
type downStore struct {
	*memory.UsageStore
	down atomic.Bool
}

var errDown = errors.New("connection refused")

func (s *downStore) Add(ctx context.Context, rows []usage.Row) error {
	if s.down.Load() {
		return errDown
	}
	return s.UsageStore.Add(ctx, rows)
}

func record(rec *usage.Recorder, minute int, api string) {
	rec.Record(usage.Record{At: t0.Add(time.Duration(minute) * time.Minute), Account: "acme", Key: "key_1", API: api,
		Channel: "rest", Outcome: usage.OK, Credits: 1, Duration: time.Millisecond})
}

func calls(t *testing.T, s usage.Store) int64 {
	t.Helper()
	res, err := usage.Run(t.Context(), s, usage.Query{Account: "acme", From: t0, To: t0.Add(24 * time.Hour), Interval: usage.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range res.Series {
		for _, p := range s.Points {
			n += p.Calls
		}
	}
	return n
}

// A flush the store refuses is kept for the next one, within MaxPending rows; past it
// the oldest rows go and their calls are counted, and the failure is logged at WARN.
func TestRecorderStoreDown(t *testing.T) {
	var logs bytes.Buffer
	s := &downStore{UsageStore: memory.NewUsageStore()}
	rec, err := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1, MaxPending: 3,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.down.Store(true)
	record(rec, 0, "a")
	record(rec, 0, "a")
	record(rec, 1, "a")
	if err := rec.Flush(t.Context()); !errors.Is(err, errDown) {
		t.Fatalf("Flush to a store that is down: %v, want its error", err)
	}
	if rec.Pending() != 2 || rec.Dropped() != 0 {
		t.Errorf("after a refused flush: %d pending, %d dropped; want 2 rows, 0", rec.Pending(), rec.Dropped())
	}
	record(rec, 0, "a") // joins a pending row
	record(rec, 2, "a")
	record(rec, 3, "a")
	_ = rec.Flush(t.Context())
	// Rows: minute 0 (3 calls), 1, 2, 3: the oldest goes.
	if rec.Pending() != 3 || rec.Dropped() != 3 {
		t.Errorf("past MaxPending: %d pending, %d dropped; want 3 rows, 3 calls", rec.Pending(), rec.Dropped())
	}
	s.down.Store(false)
	record(rec, 3, "b")
	if err := rec.Close(t.Context()); err != nil {
		t.Fatalf("Close once the store is back: %v", err)
	}
	if got := calls(t, s); got != 4 {
		t.Errorf("stored %d calls, want 4 (6 recorded, 3 dropped... minutes 1, 2, 3 and 3b)", got)
	}
	if rec.Pending() != 0 {
		t.Errorf("after a flush the store took: %d pending", rec.Pending())
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Errorf("logs: want WARN and no ERROR:\n%s", out)
	}
}

// A row no store can hold is dropped and counted at the flush, so it cannot block the
// others.
func TestRecorderDropsInvalidRows(t *testing.T) {
	s := memory.NewUsageStore()
	rec, err := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	record(rec, 0, "a")
	record(rec, 0, "bad\x00")
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rec.Dropped() != 1 || calls(t, s) != 1 {
		t.Errorf("dropped %d, stored %d; want 1 and 1", rec.Dropped(), calls(t, s))
	}
}

func TestNormalized(t *testing.T) {
	q, err := usage.Query{Account: "a", From: t0.Add(90 * time.Minute), To: t0.Add(150*time.Minute + time.Second), Interval: usage.Hour}.Normalized()
	if err != nil {
		t.Fatal(err)
	}
	if !q.From.Equal(t0.Add(time.Hour)) || !q.To.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("Normalized range [%v, %v), want [%v, %v)", q.From, q.To, t0.Add(time.Hour), t0.Add(3*time.Hour))
	}
	_, err = usage.Query{Account: "a", From: t0, To: t0.Add(2 * usage.MaxMinuteRange), Interval: usage.Minute}.Normalized()
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "coarser interval") {
		t.Errorf("too long a range: %v, want ErrInvalid saying what to do", err)
	}
	// A range whose length is no Duration: refused by its bounds, never with an
	// overflowed length (2562047h47m16.854775807s).
	far := time.Date(9999, time.January, 1, 0, 0, 0, 0, time.UTC)
	for _, q := range []usage.Query{
		{Account: "a", From: t0, To: far, Interval: usage.Minute},
		{Account: "a", From: time.Date(1, time.January, 1, 0, 0, 1, 0, time.UTC), To: t0, Interval: usage.Day},
		{Account: "a", From: far, To: far.Add(time.Hour), Interval: usage.Day},
	} {
		_, err := q.Normalized()
		var qe *usage.QueryError
		if !errors.As(err, &qe) || qe.Reason != "use a time from 1970-01-01 to 2200-01-01" || strings.Contains(err.Error(), "2562047h") {
			t.Errorf("[%v, %v): %v, want the bounds of a time", q.From, q.To, err)
		}
	}
}

func TestRecorderOptions(t *testing.T) {
	if _, err := usage.NewRecorder(nil, nil); err == nil {
		t.Error("NewRecorder(nil): no error")
	}
	rec, err := usage.NewRecorder(memory.NewUsageStore(), nil) // background flush on
	if err != nil {
		t.Fatal(err)
	}
	record(rec, 0, "a")
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRollupBy: rows narrowed to one dimension keep it, the account, bucket and outcome,
// empty the others, and sum the rows that then share a group, histograms and last use
// included.
func TestRollupBy(t *testing.T) {
	row := func(min int, key, api, channel, outcome string, calls int64, lat int) usage.Row {
		r := usage.Row{Bucket: t0.Add(time.Duration(min) * time.Minute), Account: "acme", Key: key, API: api, Channel: channel,
			Outcome: outcome, Calls: calls, Credits: 2 * calls, Last: t0.Add(time.Duration(min) * time.Minute)}
		r.Latency[lat] = calls
		return r
	}
	rows := []usage.Row{
		row(0, "k1", "echo", "rest", "ok", 1, 3),
		row(5, "k2", "echo", "mcp", "ok", 2, 4),
		row(7, "k1", "hash", "rest", "ok", 4, 3),
		row(9, "k1", "echo", "graphql", "rejected", 8, 0),
	}
	hist := func(counts map[int]int64) (h usage.Histogram) {
		for i, n := range counts {
			h[i] = n
		}
		return h
	}
	for _, tt := range []struct {
		keep usage.Dimension
		want []usage.Row
	}{
		{usage.ByAPI, []usage.Row{
			{Bucket: t0, Account: "acme", API: "echo", Outcome: "ok", Calls: 3, Credits: 6, Latency: hist(map[int]int64{3: 1, 4: 2}), Last: t0.Add(5 * time.Minute)},
			{Bucket: t0, Account: "acme", API: "echo", Outcome: "rejected", Calls: 8, Credits: 16, Latency: hist(map[int]int64{0: 8}), Last: t0.Add(9 * time.Minute)},
			{Bucket: t0, Account: "acme", API: "hash", Outcome: "ok", Calls: 4, Credits: 8, Latency: hist(map[int]int64{3: 4}), Last: t0.Add(7 * time.Minute)},
		}},
		{usage.ByKey, []usage.Row{
			{Bucket: t0, Account: "acme", Key: "k1", Outcome: "ok", Calls: 5, Credits: 10, Latency: hist(map[int]int64{3: 5}), Last: t0.Add(7 * time.Minute)},
			{Bucket: t0, Account: "acme", Key: "k1", Outcome: "rejected", Calls: 8, Credits: 16, Latency: hist(map[int]int64{0: 8}), Last: t0.Add(9 * time.Minute)},
			{Bucket: t0, Account: "acme", Key: "k2", Outcome: "ok", Calls: 2, Credits: 4, Latency: hist(map[int]int64{4: 2}), Last: t0.Add(5 * time.Minute)},
		}},
		{usage.ByChannel, usage.Rollup(rows, usage.Hour)},
	} {
		if got := usage.RollupBy(rows, usage.Hour, tt.keep); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("RollupBy %q:\n got %+v\nwant %+v", tt.keep, got, tt.want)
		}
	}
	if rows[0].Key != "k1" || rows[0].Channel != "rest" {
		t.Errorf("RollupBy changed its input: %+v", rows[0])
	}
}
