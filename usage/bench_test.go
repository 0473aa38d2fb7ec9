package usage_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// BenchmarkRecord measures Recorder.Record, the part of usage recording on every call's
// path, from every core at once, over 40 groups of one account.
//
//	go test -run='^$' -bench=Record ./usage/
func BenchmarkRecord(b *testing.B) {
	rec, err := usage.NewRecorder(memory.NewUsageStore(), &usage.RecorderOptions{FlushInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close(b.Context())
	var keys, apis [8]string
	for i := range keys {
		keys[i], apis[i] = fmt.Sprintf("key_%020d", i), fmt.Sprint("api-", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			rec.Record(usage.Record{At: t0, Account: "acct_0123456789abcdef", Key: keys[i%4], API: apis[i%5],
				Channel: "rest", Outcome: usage.OK, Credits: 1, Duration: time.Duration(i%1000) * time.Microsecond})
		}
	})
}
