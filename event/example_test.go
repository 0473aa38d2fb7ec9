package event_test

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/event"
)

// An observer that counts the credits charged per API. A real one would export them
// (metrics) or queue them (webhooks); it must return promptly either way.
func Example() {
	var bus event.Bus // a service's is svc.Events()
	charged := map[string]int64{}
	bus.Subscribe(event.ObserverFunc(func(_ context.Context, e event.Event) {
		for _, a := range e.(*event.Call).APIs {
			charged[a.API] += a.Credits
		}
	}), event.CallFinished)

	bus.Publish(context.Background(), &event.Call{Account: "acme", APIs: []event.APIResult{{API: "hash", Credits: 2}}})
	bus.Publish(context.Background(), &event.Refusal{Account: "acme", APIs: []string{"hash"}, Code: "rate_limited"})
	fmt.Println(charged["hash"], bus.Wants(event.CallRefused))
	// Output: 2 false
}

// A tracer that prints each phase as it ends; a real one makes spans (package tracing)
// or sets profiler labels, and returns the context it derived.
func ExampleBus_Trace() {
	var bus event.Bus // a service's is svc.Events()
	cancel := bus.Trace(event.TracerFunc(func(ctx context.Context, p event.Phase) (context.Context, func(error)) {
		return ctx, func(err error) { fmt.Println(p.Step, p.API, err) }
	}))
	defer cancel()

	// What the service does around each API's run:
	ctx, end := bus.Begin(context.Background(), event.Phase{Step: event.StepRun, API: "hash"})
	_ = ctx // the API's handler runs under ctx
	end(nil)
	// Output: run hash <nil>
}
