package event_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/event"
)

// recorder is an observer that keeps the kinds it is told of.
type recorder struct {
	mu    sync.Mutex
	kinds []event.Kind
}

func (r *recorder) Observe(_ context.Context, e event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds = append(r.kinds, e.Kind())
}

func (r *recorder) got() []event.Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.Kind(nil), r.kinds...)
}

func TestSubscribe(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	events := []event.Event{
		&event.Call{At: at},
		&event.Refusal{At: at},
		&event.Sweep{At: at},
		&event.Change{Type: event.KeyRotated, At: at},
		&event.Change{Type: event.KeyRevoked, At: at},
	}
	tests := []struct {
		name  string
		kinds []event.Kind
		want  []event.Kind
	}{
		{"every kind", nil, []event.Kind{event.CallFinished, event.CallRefused, event.ReservationsVoided, event.KeyRotated, event.KeyRevoked}},
		{"calls", []event.Kind{event.CallFinished, event.CallRefused}, []event.Kind{event.CallFinished, event.CallRefused}},
		{"one key kind", []event.Kind{event.KeyRevoked}, []event.Kind{event.KeyRevoked}},
		{"a kind twice", []event.Kind{event.KeyRevoked, event.KeyRevoked}, []event.Kind{event.KeyRevoked}},
		{"unknown kinds", []event.Kind{0, 200}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b event.Bus
			r := &recorder{}
			b.Subscribe(r, tc.kinds...)
			for _, e := range events {
				if e.Time() != at {
					t.Fatalf("%s: Time = %v", e.Kind(), e.Time())
				}
				b.Publish(t.Context(), e)
			}
			if got := r.got(); !equal(got, tc.want) {
				t.Fatalf("told %v, want %v", got, tc.want)
			}
		})
	}
}

func equal(a, b []event.Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCancel(t *testing.T) {
	var b event.Bus
	if b.Wants(event.KeyCreated) {
		t.Fatal("an empty bus wants KeyCreated")
	}
	first, second := &recorder{}, &recorder{}
	cancel := b.Subscribe(first, event.KeyCreated)
	b.Subscribe(second, event.KeyCreated)
	if !b.Wants(event.KeyCreated) || b.Wants(event.KeyRevoked) {
		t.Fatal("Wants does not follow the subscriptions")
	}
	b.Publish(t.Context(), &event.Change{Type: event.KeyCreated})
	cancel()
	cancel() // a second cancel changes nothing
	b.Publish(t.Context(), &event.Change{Type: event.KeyCreated})
	if n := len(first.got()); n != 1 {
		t.Fatalf("the canceled observer was told %d events, want 1", n)
	}
	if n := len(second.got()); n != 2 {
		t.Fatalf("the other observer was told %d events, want 2", n)
	}
}

// An observer that cancels its own subscription, or subscribes another, while it is
// told of an event does not deadlock, and the publish under way is not changed.
func TestSubscribeFromObserver(t *testing.T) {
	var b event.Bus
	late := &recorder{}
	var cancel func()
	cancel = b.Subscribe(event.ObserverFunc(func(context.Context, event.Event) {
		cancel()
		b.Subscribe(late, event.KeyRevoked)
	}), event.KeyRevoked)
	b.Publish(t.Context(), &event.Change{Type: event.KeyRevoked})
	if n := len(late.got()); n != 0 {
		t.Fatalf("an observer subscribed during a publish was told of it (%d)", n)
	}
	b.Publish(t.Context(), &event.Change{Type: event.KeyRevoked})
	if n := len(late.got()); n != 1 {
		t.Fatalf("the late observer was told %d events, want 1", n)
	}
}

// A panicking observer is logged; the others are told all the same.
func TestPanickingObserver(t *testing.T) {
	var buf bytes.Buffer
	b := event.Bus{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	b.Subscribe(event.ObserverFunc(func(context.Context, event.Event) { panic("boom") }))
	r := &recorder{}
	b.Subscribe(r)
	b.Publish(t.Context(), &event.Sweep{Voided: 3})
	if n := len(r.got()); n != 1 {
		t.Fatalf("the observer after a panicking one was told %d events, want 1", n)
	}
	if out := buf.String(); !strings.Contains(out, "boom") || !strings.Contains(out, "reservations.voided") {
		t.Fatalf("the panic was not logged with the event: %q", out)
	}
}

// Publishing and subscribing at once is safe (run with -race).
func TestConcurrent(t *testing.T) {
	var b event.Bus
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				b.Publish(context.Background(), &event.Call{})
			}
		})
		wg.Go(func() {
			for range 50 {
				cancel := b.Subscribe(&recorder{}, event.CallFinished)
				cancel()
			}
		})
	}
	wg.Wait()
	if b.Wants(event.CallFinished) {
		t.Fatal("every subscription was canceled, yet the bus wants calls")
	}
}

func TestKindNames(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range event.Kinds() {
		name := k.String()
		if name == "unknown" || seen[name] || strings.Count(name, ".") != 1 {
			t.Errorf("kind %d has the name %q", k, name)
		}
		seen[name] = true
	}
	if event.Kind(0).String() != "unknown" || event.Kind(250).String() != "unknown" {
		t.Error("a kind that is not one has a name")
	}
}

// Publishing to a kind nobody wants allocates nothing.
func TestPublishUnwantedAllocatesNothing(t *testing.T) {
	var b event.Bus
	b.Subscribe(&recorder{}, event.KeyRevoked)
	e := &event.Call{}
	if n := testing.AllocsPerRun(100, func() { b.Publish(context.Background(), e) }); n != 0 {
		t.Fatalf("Publish allocated %v times", n)
	}
}
