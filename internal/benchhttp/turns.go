package benchhttp

import (
	"slices"
	"testing"
	"time"
)

// ByTurns calls call(i) for each variant i of names by turns, turn calls a turn, each
// variant first in its turn in some round, until about b.N calls are made, and reports
// the median time a call of each variant took over its turns ("<name>-ns/call"), and
// its ratio to the first variant's ("<name>/<first>"). On a busy machine the variants
// then meet the same noise, so their ratios stay meaningful when their absolute times
// do not.
func ByTurns(b *testing.B, names []string, turn int, call func(i int)) {
	times := make([][]float64, len(names))
	b.ResetTimer()
	for round := 0; round*turn*len(names) < b.N; round++ {
		for k := range names {
			i := (round + k) % len(names)
			start := time.Now()
			for range turn {
				call(i)
			}
			times[i] = append(times[i], float64(time.Since(start).Nanoseconds())/float64(turn))
		}
	}
	b.StopTimer()
	median := make([]float64, len(names))
	for i := range names {
		slices.Sort(times[i])
		median[i] = times[i][len(times[i])/2]
	}
	for i, name := range names {
		b.ReportMetric(median[i], name+"-ns/call")
		if i > 0 {
			b.ReportMetric(median[i]/median[0], name+"/"+names[0])
		}
	}
	b.ReportMetric(0, "ns/op")
}
