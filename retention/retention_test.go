package retention_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/retention"
)

// fake folds up to limit of due requests, and records each call.
type fake struct {
	due    int
	err    error
	before []time.Time
	limits []int
}

func (f *fake) Compact(_ context.Context, before time.Time, limit int) (int, error) {
	f.before = append(f.before, before)
	f.limits = append(f.limits, limit)
	n := min(f.due, limit)
	f.due -= n
	return n, f.err
}

var now = time.Date(2030, time.May, 1, 0, 0, 0, 0, time.UTC)

func TestCompactRound(t *testing.T) {
	f := &fake{due: 25}
	c, err := retention.New(f, &retention.Options{Batch: 10, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Compact(t.Context())
	if err != nil || n != 25 {
		t.Fatalf("Compact: %d (%v), want 25", n, err)
	}
	if len(f.before) != 3 {
		t.Fatalf("%d calls of the store, want 3 (10, 10, then 5 of 10)", len(f.before))
	}
	for _, b := range f.before {
		if want := now.Add(-retention.DefaultRetention); !b.Equal(want) {
			t.Errorf("before %s, want %s: now less the default retention", b, want)
		}
	}
}

func TestCompactRoundBound(t *testing.T) {
	f := &fake{due: 100}
	c, err := retention.New(f, &retention.Options{Retention: 30 * 24 * time.Hour, Batch: 10, Round: 25, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Compact(t.Context())
	if err != nil || n != 25 {
		t.Fatalf("Compact: %d (%v), want the round's 25", n, err)
	}
	if want := []int{10, 10, 5}; len(f.limits) != 3 || f.limits[2] != want[2] {
		t.Errorf("limits %v, want %v", f.limits, want)
	}
	if want := now.Add(-30 * 24 * time.Hour); !f.before[0].Equal(want) {
		t.Errorf("before %s, want %s", f.before[0], want)
	}
}

func TestCompactError(t *testing.T) {
	boom := errors.New("boom")
	f := &fake{due: 100, err: boom}
	c, err := retention.New(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.Compact(t.Context()); !errors.Is(err, boom) || n != 100 {
		t.Errorf("Compact: %d (%v), want the first call's 100 and its error", n, err)
	}
}

func TestOptions(t *testing.T) {
	if _, err := retention.New(nil, nil); err == nil {
		t.Error("New without a store: no error")
	}
	for _, o := range []retention.Options{{Retention: -1}, {Batch: -1}, {Round: -1}, {Retention: retention.MinRetention - time.Second}} {
		if _, err := retention.New(&fake{}, &o); err == nil {
			t.Errorf("New with %+v: no error", o)
		}
	}
	if _, err := retention.New(&fake{}, &retention.Options{Retention: retention.MinRetention}); err != nil {
		t.Errorf("New with the minimum retention: %v", err)
	}
}
