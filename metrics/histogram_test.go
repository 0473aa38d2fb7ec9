package metrics

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// A durationVec exposes what a prometheus.HistogramVec of the same buckets exposes
// for the same durations in seconds: each duration in the bucket of its seconds (those
// on a bound, and around it, included), the count, and the sum.
func TestDurationVecIsPrometheusHistogram(t *testing.T) {
	for _, buckets := range [][]float64{DefaultStoreBuckets(), DefaultCallBuckets(), {-1, 0, 1e-9, 0.1, 0.3, math.Inf(1)}} {
		ours := newDurationVec("d_seconds", "Durations.", buckets, "l")
		theirs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "d_seconds", Help: "Durations.", Buckets: buckets}, []string{"l"})
		var ds []time.Duration
		for _, b := range buckets {
			if math.IsInf(b, 0) {
				continue
			}
			d := time.Duration(b * 1e9)
			ds = append(ds, d-1, d, d+1)
		}
		ds = append(ds, 0, -time.Second, 17*time.Microsecond, time.Hour, math.MaxInt64/4)
		first := ours.with("a")
		for _, l := range []string{"a", "b"} {
			h, o := ours.with(l), theirs.WithLabelValues(l)
			if l == "a" && h != first {
				t.Error("with makes a second histogram of the same labels")
			}
			for _, d := range ds {
				h.observe(d)
				o.Observe(d.Seconds())
				if l == "b" {
					break
				}
			}
		}
		if want, got := exposition(t, theirs), exposition(t, ours); got != want {
			t.Errorf("buckets %v: exposed\n%s\nwant\n%s", buckets, got, want)
		}
	}
}

// exposition returns the text format of c's metrics.
func exposition(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	var b strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			h := m.GetHistogram()
			b.WriteString(m.GetLabel()[0].GetValue())
			for _, bk := range h.GetBucket() {
				b.WriteString(" " + prometheusFloat(bk.GetUpperBound()) + ":" + prometheusFloat(float64(bk.GetCumulativeCount())))
			}
			b.WriteString(" count " + prometheusFloat(float64(h.GetSampleCount())) + " sum " + prometheusFloat(h.GetSampleSum()) + "\n")
		}
	}
	return b.String()
}

func prometheusFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// The buckets' counts agree with the count while observations go on (the race
// detector checks the rest).
func TestDurationVecConcurrent(t *testing.T) {
	v := newDurationVec("d_seconds", "Durations.", DefaultStoreBuckets(), "l")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := v.with("a")
			for i := range 2000 {
				h.observe(time.Duration(i*g) * time.Microsecond)
			}
		}()
	}
	for range 20 {
		ch := make(chan prometheus.Metric, 10)
		v.Collect(ch)
		close(ch)
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			h := pb.GetHistogram()
			bs := h.GetBucket()
			if last := bs[len(bs)-1].GetCumulativeCount(); last > h.GetSampleCount() {
				t.Fatalf("bucket %v counts %d, more than the count %d", bs[len(bs)-1].GetUpperBound(), last, h.GetSampleCount())
			}
		}
	}
	wg.Wait()
}
