package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/brand"
)

func TestDelivererOptionsCheck(t *testing.T) {
	tests := []struct {
		name string
		o    *DelivererOptions
		want string // in the error; "" for none
	}{
		{"nil", nil, ""},
		{"zero", &DelivererOptions{}, ""},
		{"lease just long enough", &DelivererOptions{Timeout: 5 * time.Second, Lease: 5*time.Second + LeaseMargin}, ""},
		{"lease too short", &DelivererOptions{Timeout: 5 * time.Second, Lease: 5*time.Second + LeaseMargin - 1}, "lease"},
		{"lease too short for the default timeout", &DelivererOptions{Lease: DefaultTimeout}, "lease"},
		{"long timeout, default lease", &DelivererOptions{Timeout: 2 * time.Minute}, ""},
		{"negative timeout", &DelivererOptions{Timeout: -1}, "timeout"},
		{"jitter 1", &DelivererOptions{Jitter: 1}, "jitter"},
		{"no jitter", &DelivererOptions{Jitter: -1}, ""},
		{"concurrency", &DelivererOptions{Concurrency: MaxConcurrency + 1}, "concurrency"},
		{"negative concurrency", &DelivererOptions{Concurrency: -1}, "concurrency"},
		{"negative poll", &DelivererOptions{Poll: -1}, "poll"},
		{"bad schedule", &DelivererOptions{Schedule: Schedule{0}}, "wait 1"},
		{"bad brand", &DelivererOptions{Brand: brand.Brand{Name: "X"}}, "Command"},
	}
	for _, tt := range tests {
		err := tt.o.Check()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one with %q", tt.name, err, tt.want)
		}
	}
}

func TestNewDelivererDefaults(t *testing.T) {
	d, err := NewDeliverer(nopStore{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.timeout != DefaultTimeout || d.lease != DefaultLease || d.concurrency != DefaultConcurrency ||
		d.poll != DefaultPoll || d.retention != DefaultRetention || d.jitter != DefaultJitter ||
		d.maxRetryAfter != DefaultMaxRetryAfter || d.pruneInterval != DefaultPruneInterval {
		t.Errorf("defaults: %+v", d)
	}
	if d.userAgent != "tollgate-webhooks/1" {
		t.Errorf("user agent %q", d.userAgent)
	}
	if d.schedule.String() != DefaultSchedule().String() {
		t.Errorf("schedule %s", d.schedule)
	}
	d, err = NewDeliverer(nopStore{}, &DelivererOptions{Timeout: time.Minute, Brand: brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.lease != time.Minute+LeaseMargin || d.userAgent != "acme-webhooks/1" {
		t.Errorf("lease %s, user agent %q", d.lease, d.userAgent)
	}
	if _, err := NewDeliverer(nopStore{}, &DelivererOptions{Lease: time.Second}); err == nil {
		t.Error("NewDeliverer took a lease shorter than the timeout")
	}
	if _, err := NewDeliverer(nil, nil); err == nil {
		t.Error("NewDeliverer took no store")
	}
}

func TestCutError(t *testing.T) {
	short := strings.Repeat("a", MaxError)
	if cutError(short) != short {
		t.Error("an error of MaxError bytes was cut")
	}
	long := strings.Repeat("é", MaxError) // two bytes each
	got := cutError(long)
	if len(got) > MaxError || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Errorf("cut to %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got[len(got)-10:])
	}
}

func TestBreakers(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	b := newBreakers(30 * time.Second)
	// admit returns whether it admits, and until when it holds back.
	admit := func(now time.Duration) func() (bool, time.Time) {
		return func() (bool, time.Time) { return b.admit("h", at(now)) }
	}
	none := time.Time{}
	steps := []struct {
		name    string
		do      func() (bool, time.Time)
		want    bool
		wantTil time.Time
	}{
		{"a host never seen is admitted", admit(0), true, none},
		{"and again, at once", admit(0), true, none},
		{"one did not answer", func() (bool, time.Time) { b.done("h", false, t0); return true, none }, true, none},
		{"then none is admitted, until the cooldown's end", admit(29 * time.Second), false, at(30 * time.Second)},
		{"another host is", func() (bool, time.Time) { return b.admit("other", t0) }, true, none},
		{"after the cooldown, one is", admit(30 * time.Second), true, none},
		{"but only one: the next is held a cooldown", admit(31 * time.Second), false, at(61 * time.Second)},
		{"it is abandoned", func() (bool, time.Time) { b.abandon("h"); return true, none }, true, none},
		{"so another one is", admit(32 * time.Second), true, none},
		{"which does not answer", func() (bool, time.Time) { b.done("h", false, at(40*time.Second)); return true, none }, true, none},
		{"the cooldown starts again", admit(60 * time.Second), false, at(70 * time.Second)},
		{"one is, after it", admit(70 * time.Second), true, none},
		{"which is answered", func() (bool, time.Time) { b.done("h", true, at(70*time.Second)); return true, none }, true, none},
		{"so the host is forgotten", func() (bool, time.Time) { return len(b.hosts) == 0, none }, true, none},
		{"and admitted freely", admit(70 * time.Second), true, none},
	}
	for _, s := range steps {
		got, until := s.do()
		if got != s.want || !until.Equal(s.wantTil) {
			t.Fatalf("%s: got %v until %v, want %v until %v", s.name, got, until, s.want, s.wantTil)
		}
	}
}

func TestBreakersBounded(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	b := newBreakers(time.Second)
	for i := range maxBreakers + 10 {
		b.done(strings.Repeat("x", i%50)+string(rune('a'+i%26))+time.Duration(i).String(), false, t0.Add(time.Duration(i)*time.Second))
	}
	if len(b.hosts) > maxBreakers {
		t.Errorf("%d hosts remembered", len(b.hosts))
	}
}

// nopStore is a Store that holds nothing, for the tests that make a Deliverer and
// never run it. (The tests that run one are in package webhook_test, on the memory
// store, which imports this package.)
type nopStore struct{}

var errNop = errors.New("nopStore holds nothing")

func (nopStore) CreateEndpoint(context.Context, Endpoint) (Endpoint, error) {
	return Endpoint{}, errNop
}
func (nopStore) Endpoint(context.Context, string) (Endpoint, error)    { return Endpoint{}, errNop }
func (nopStore) Endpoints(context.Context, string) ([]Endpoint, error) { return nil, errNop }
func (nopStore) UpdateEndpoint(context.Context, Endpoint) (Endpoint, error) {
	return Endpoint{}, errNop
}
func (nopStore) DeleteEndpoint(context.Context, string) error { return errNop }
func (nopStore) Enqueue(context.Context, Message, []string, time.Time) (bool, []string, error) {
	return false, nil, errNop
}
func (nopStore) Claim(context.Context, time.Time, time.Duration, int) ([]Delivery, error) {
	return nil, errNop
}
func (nopStore) Record(context.Context, Outcome) error                   { return errNop }
func (nopStore) Deliveries(context.Context, string, Query) (Page, error) { return Page{}, errNop }
func (nopStore) Resend(context.Context, string, string, time.Time) (Delivery, error) {
	return Delivery{}, errNop
}
func (nopStore) Pending(context.Context) (int64, error)          { return 0, errNop }
func (nopStore) Prune(context.Context, time.Time) (int64, error) { return 0, errNop }
func (nopStore) ClaimSweep(context.Context, string, time.Time, time.Duration) (SweepClaim, bool, error) {
	return SweepClaim{}, false, errNop
}
func (nopStore) RecordSweep(context.Context, string, string, string) error { return errNop }
