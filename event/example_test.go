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
