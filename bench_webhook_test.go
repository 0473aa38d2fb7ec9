package tollgate

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
)

// BenchmarkCallObserved measures what the observers of the service's events cost a
// whole call (Service.Call on the memory stores): none subscribed (the service builds
// no event), an observer that does nothing (the event is built and published), and a
// webhook Dispatcher (the event is built, and the Dispatcher looks at its balance).
//
//	go test -run='^$' -bench=CallObserved -benchmem .
func BenchmarkCallObserved(b *testing.B) {
	for _, bc := range []struct {
		name     string
		observer func(b *testing.B) event.Observer
	}{
		{"none", func(*testing.B) event.Observer { return nil }},
		{"noop", func(*testing.B) event.Observer {
			return event.ObserverFunc(func(context.Context, event.Event) {})
		}},
		{"dispatcher", func(b *testing.B) event.Observer {
			d, err := webhook.NewDispatcher(memory.NewWebhookStore(), &webhook.DispatcherOptions{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); d.Run(ctx) }()
			b.Cleanup(func() { cancel(); <-done })
			return d
		}},
	} {
		for _, parallel := range []bool{false, true} {
			mode := "serial"
			if parallel {
				mode = "parallel"
			}
			b.Run(bc.name+"/"+mode, func(b *testing.B) {
				s, key := benchService(b)
				if o := bc.observer(b); o != nil {
					s.Events().Subscribe(o)
				}
				cred, err := auth.CredentialFrom(map[string][]string{"X-Api-Key": {key}})
				if err != nil {
					b.Fatal(err)
				}
				caller := Caller{Credential: cred, Channel: auth.ChannelREST, Addr: netip.MustParseAddr("203.0.113.7")}
				call := func(ctx context.Context) {
					if r := s.Call(ctx, caller, "hash", nil); r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				if !parallel {
					ctx := context.Background()
					for b.Loop() {
						call(ctx)
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						call(ctx)
					}
				})
			})
		}
	}
}
