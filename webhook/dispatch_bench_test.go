package webhook_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/wire"
)

// BenchmarkObserveCall measures what a Dispatcher adds to the call path: the
// publication of a settled *event.Call (and of a rate-limit refusal) on the service's
// bus, with nothing subscribed, with an observer that does nothing, and with a
// Dispatcher. The calls are of 1024 accounts, below every threshold ("below") or past
// them all and enqueued already ("past", the common case once an account is past 80%).
// The parallel cases show the contention of the Dispatcher's one RWMutex.
//
//	go test -run='^$' -bench=ObserveCall -benchmem ./webhook/
func BenchmarkObserveCall(b *testing.B) {
	const accounts = 1024
	names := make([]string, accounts)
	for i := range names {
		names[i] = fmt.Sprintf("acct-%d", i)
	}
	calls := func(used int64) []*event.Call {
		out := make([]*event.Call, accounts)
		for i := range out {
			bal := march
			bal.Used, bal.Remaining = used, bal.Allowance-used
			out[i] = &event.Call{At: d0.Add(time.Hour), Account: names[i], Key: "k1", Plan: "basic", Balance: bal,
				Settlement: event.Settled, APIs: []event.APIResult{{API: "hash", Credits: 1}}}
		}
		return out
	}
	refusals := make([]*event.Refusal, accounts)
	for i := range refusals {
		refusals[i] = &event.Refusal{At: d0.Add(time.Hour), Account: names[i], Key: "k1", Plan: "basic",
			Code: wire.CodeRateLimited, Balance: march, APIs: []string{"hash"}}
	}
	type observer struct {
		name string
		make func(b *testing.B) event.Observer
	}
	settle := func(o event.Observer) {
		if d, ok := o.(*webhook.Dispatcher); ok {
			for d.Stats().Queued > 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	observers := []observer{
		{"none", func(*testing.B) event.Observer { return nil }},
		{"noop", func(*testing.B) event.Observer {
			return event.ObserverFunc(func(context.Context, event.Event) {})
		}},
		{"dispatcher", func(b *testing.B) event.Observer {
			d, err := webhook.NewDispatcher(memory.NewWebhookStore(), &webhook.DispatcherOptions{
				Now: func() time.Time { return d0 }, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); d.Run(ctx) }()
			b.Cleanup(func() { cancel(); <-done })
			return d
		}},
	}
	for _, ev := range []struct {
		name   string
		events func() []event.Event
	}{
		{"call-below", func() []event.Event { return asEvents(calls(10)) }},
		{"call-past", func() []event.Event { return asEvents(calls(100)) }},
		{"refusal-rate", func() []event.Event { return asEvents(refusals) }},
	} {
		for _, o := range observers {
			for _, parallel := range []bool{false, true} {
				mode := "serial"
				if parallel {
					mode = "parallel"
				}
				b.Run(ev.name+"/"+o.name+"/"+mode, func(b *testing.B) {
					bus := &event.Bus{}
					obs := o.make(b)
					if obs != nil {
						bus.Subscribe(obs)
					}
					es := ev.events()
					ctx := context.Background()
					// Warm: the past thresholds enqueued, the dispatcher's memory filled.
					for range 2 {
						for _, e := range es {
							bus.Publish(ctx, e)
						}
						settle(obs)
					}
					b.ReportAllocs()
					b.ResetTimer()
					if !parallel {
						i := 0
						for b.Loop() {
							bus.Publish(ctx, es[i%accounts])
							i++
						}
						return
					}
					var next atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						i := int(next.Add(97))
						for pb.Next() {
							bus.Publish(ctx, es[i%accounts])
							i++
						}
					})
				})
			}
		}
	}
}

func asEvents[E event.Event](in []E) []event.Event {
	out := make([]event.Event, len(in))
	for i, e := range in {
		out[i] = e
	}
	return out
}
