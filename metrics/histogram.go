package metrics

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A durationVec is a Prometheus histogram of durations in seconds, by label values:
// what prometheus.HistogramVec exposes, for less per observation, which every call
// and every store operation pays. An observation is a duration, not a float: it finds
// its bucket by comparing integers and counts itself with two atomic additions (its
// bucket's count and the sum in nanoseconds), where prometheus.Histogram converts
// seconds to a float, compares floats, and counts in a hot and a cold half that it
// swaps at each collection so that a scrape reads a consistent histogram. Here the
// count a scrape reports is the sum of the buckets' counts it read, so that the two
// agree; the sum may lack an observation made while it was read, which the next
// scrape has.
type durationVec struct {
	desc    *prometheus.Desc
	upper   []float64       // the buckets' upper bounds, in seconds
	longest []time.Duration // the longest duration that each bucket holds

	mu       sync.Mutex
	children map[string]*durations // by their label values, joined
	list     []*durations          // in the order they were made
}

// durations is the histogram of one set of label values.
type durations struct {
	labels  []string
	created time.Time
	longest []time.Duration // the vector's
	counts  []atomic.Uint64 // by bucket; the last is +Inf's
	sum     atomic.Int64    // in nanoseconds
}

// newDurationVec returns the histogram vector name, with the buckets' upper bounds in
// seconds (increasing; a last bound of +Inf is the bucket every histogram has).
func newDurationVec(name, help string, upper []float64, labels ...string) *durationVec {
	if n := len(upper); n > 0 && math.IsInf(upper[n-1], 1) {
		upper = upper[:n-1]
	}
	v := &durationVec{
		desc:     prometheus.NewDesc(name, help, labels, nil),
		upper:    upper,
		longest:  make([]time.Duration, len(upper)),
		children: map[string]*durations{},
	}
	for i, b := range upper {
		v.longest[i] = longestWithin(b)
	}
	return v
}

// longestWithin returns the longest duration d whose d.Seconds() is at most seconds,
// so that a duration is in the bucket it would be in as seconds.
func longestWithin(seconds float64) time.Duration {
	ns := seconds * 1e9
	switch {
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	d := time.Duration(math.Floor(ns))
	for d > math.MinInt64 && d.Seconds() > seconds {
		d--
	}
	for d < math.MaxInt64 && (d+1).Seconds() <= seconds {
		d++
	}
	return d
}

// with returns the histogram of the label values, made at their first use. The hot
// paths keep what it returns, rather than calling it for each observation.
func (v *durationVec) with(labels ...string) *durations {
	key := strings.Join(labels, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	if h, ok := v.children[key]; ok {
		return h
	}
	h := &durations{
		labels:  append([]string(nil), labels...),
		created: time.Now(),
		longest: v.longest,
		counts:  make([]atomic.Uint64, len(v.longest)+1),
	}
	v.children[key] = h
	v.list = append(v.list, h)
	return h
}

// observe counts a duration.
func (h *durations) observe(d time.Duration) {
	i := 0
	for i < len(h.longest) && d > h.longest[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// Describe is prometheus.Collector's.
func (v *durationVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect is prometheus.Collector's: one histogram per set of label values seen.
func (v *durationVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	list := v.list[:len(v.list):len(v.list)]
	v.mu.Unlock()
	for _, h := range list {
		buckets := make(map[float64]uint64, len(v.upper))
		var count uint64
		for i := range h.counts {
			count += h.counts[i].Load()
			if i < len(v.upper) {
				buckets[v.upper[i]] = count
			}
		}
		sum := time.Duration(h.sum.Load()).Seconds()
		ch <- prometheus.MustNewConstHistogramWithCreatedTimestamp(v.desc, count, sum, buckets, h.created, h.labels...)
	}
}
