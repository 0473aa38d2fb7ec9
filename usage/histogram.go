package usage

import (
	"math"
	"sort"
	"time"
)

// The latency histogram's fixed, log-scale buckets. Bucket 0 holds the durations below
// [MinLatency]; bucket i, for 1 <= i < NumBuckets-1, holds those in
// [MinLatency*Growth^(i-1), MinLatency*Growth^i); the last bucket holds everything from
// MinLatency*Growth^(NumBuckets-2) (about 105 s) up. Growth is 2^(1/4), four buckets
// per doubling.
//
// The boundaries are part of the stored format: every store keeps a histogram as its
// NumBuckets counts, so histograms from any instance, minute or store merge exactly by
// adding their counts, and rollups to the hour and the day lose nothing.
const (
	// NumBuckets is the number of buckets of a [Histogram].
	NumBuckets = 82
	// MinLatency is the upper bound of the first bucket.
	MinLatency = 100 * time.Microsecond
)

// Growth is the ratio between the bounds of a bucket, 2^(1/4).
var Growth = math.Pow(2, 0.25)

// QuantileError is the largest relative error of [Histogram.Quantile] for a duration
// between MinLatency and the last bucket's lower bound: 2^(1/8)-1, about 9.05%. The
// estimate is the geometric middle of the bucket that holds the rank asked for, so it
// lies within a factor 2^(1/8) of the true value at that rank.
var QuantileError = math.Pow(2, 0.125) - 1

// bounds[i] is the lower bound of bucket i+1, in nanoseconds: MinLatency*Growth^i.
var bounds = func() [NumBuckets - 1]int64 {
	var b [NumBuckets - 1]int64
	for i := range b {
		b[i] = int64(math.Round(float64(MinLatency) * math.Pow(2, float64(i)/4)))
	}
	return b
}()

// A Histogram counts durations in the fixed buckets described at [NumBuckets]. The zero
// value is empty. Histograms merge exactly with [Histogram.Merge].
type Histogram [NumBuckets]int64

// BucketOf returns the index of the bucket that holds d.
func BucketOf(d time.Duration) int {
	// The number of bounds at or below d is the bucket's index.
	return sort.Search(len(bounds), func(i int) bool { return bounds[i] > int64(d) })
}

// BucketBounds returns the bounds of bucket i: lo <= d < hi for the durations it
// holds. The first bucket's lo is 0 and the last bucket's hi is math.MaxInt64.
func BucketBounds(i int) (lo, hi time.Duration) {
	lo, hi = 0, math.MaxInt64
	if i > 0 {
		lo = time.Duration(bounds[i-1])
	}
	if i < len(bounds) {
		hi = time.Duration(bounds[i])
	}
	return lo, hi
}

// Observe counts one duration.
func (h *Histogram) Observe(d time.Duration) { h[BucketOf(d)]++ }

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, n := range o {
		h[i] += n
	}
}

// Count returns the number of durations counted.
func (h *Histogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns an estimate of the q-quantile (0 < q <= 1) of the counted durations:
// the duration at rank ceil(q*Count), estimated as the geometric middle of its bucket
// (within [QuantileError] of the true value, give or take the rounding to whole
// nanoseconds). A rank in the first bucket is reported as MinLatency, one in the last
// as that bucket's lower bound. It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	total := h.Count()
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	rank = min(max(rank, 1), total)
	var seen int64
	for i, c := range h {
		seen += c
		if seen < rank {
			continue
		}
		lo, hi := BucketBounds(i)
		switch {
		case i == 0:
			return hi
		case i == NumBuckets-1:
			return lo
		}
		return time.Duration(math.Round(math.Sqrt(float64(lo) * float64(hi))))
	}
	return 0 // unreachable: seen reaches total
}

// Trimmed returns h's counts without the trailing zeros, the form stores keep.
func (h *Histogram) Trimmed() []int64 {
	n := len(h)
	for n > 0 && h[n-1] == 0 {
		n--
	}
	return h[:n:n]
}

// HistogramOf returns the histogram with the given counts, the form [Histogram.Trimmed]
// returns. Counts beyond NumBuckets (from a store written with more buckets) are added
// to the last bucket.
func HistogramOf(counts []int64) Histogram {
	var h Histogram
	for i, c := range counts {
		h[min(i, NumBuckets-1)] += c
	}
	return h
}
