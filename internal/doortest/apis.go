package doortest

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
)

// A Blocker controls the "block" test API ([Blocker.API]): a call signals that it
// entered, then waits until the test releases it or its context ends. The doors' test
// harnesses add it to their catalogs to hold calls in flight.
type Blocker struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewBlocker returns a blocker whose API holds every call until [Blocker.Release].
func NewBlocker() *Blocker {
	return &Blocker{entered: make(chan struct{}, 64), release: make(chan struct{})}
}

// Release lets every blocked call (now and later) return.
func (b *Blocker) Release() { b.once.Do(func() { close(b.release) }) }

// Entered is sent a value each time a call enters the API (dropped when the test has
// not taken the last 64).
func (b *Blocker) Entered() <-chan struct{} { return b.entered }

// WaitEntered waits until a call is running inside the API, failing the test if its
// context ends first.
func (b *Blocker) WaitEntered(t testing.TB) {
	t.Helper()
	select {
	case <-b.entered:
	case <-t.Context().Done():
		t.Fatal("the block API was never entered")
	}
}

// API is the "block" API, costing 1 credit, whose result is {"released": true}.
func (b *Blocker) API() catalog.API {
	return catalog.API{
		ID: "block", Title: "Block", Description: "Waits until the test releases it.",
		Method: http.MethodGet, Cost: 1,
		Result: []catalog.Field{{Name: "released", Type: catalog.Boolean}},
		Handler: catalog.HandlerFunc(func(ctx context.Context, _ *catalog.Request) (any, error) {
			select {
			case b.entered <- struct{}{}:
			default:
			}
			select {
			case <-b.release:
				return map[string]any{"released": true}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}),
	}
}

// SecretDetail is in the errors of the failing test APIs: no answer may show it.
const SecretDetail = "secret internal detail"

// FailAPI is the "fail" API, costing cost credits, which fails on the service's side
// with an error that names [SecretDetail].
func FailAPI(cost int64) catalog.API {
	return catalog.API{
		ID: "fail", Title: "Fail", Description: "Fails on the service's side.",
		Method: http.MethodGet, Cost: cost,
		Result: []catalog.Field{{Name: "never", Type: catalog.String}},
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
			return nil, errors.New(SecretDetail + ": disk on fire")
		}),
	}
}

// PanicAPI is the "panic" API, costing 1 credit, which panics with a value that names
// [SecretDetail].
func PanicAPI() catalog.API {
	return catalog.API{
		ID: "panic", Title: "Panic", Description: "Panics.",
		Method: http.MethodGet, Cost: 1,
		Result: []catalog.Field{{Name: "never", Type: catalog.String}},
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
			panic(SecretDetail + ": nil map")
		}),
	}
}
