package webhook

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
		{"endpoint concurrency", &DelivererOptions{EndpointConcurrency: MaxConcurrency + 1}, "endpoint concurrency"},
		{"negative endpoint concurrency", &DelivererOptions{EndpointConcurrency: -1}, "endpoint concurrency"},
		{"account concurrency", &DelivererOptions{AccountConcurrency: MaxConcurrency + 1}, "account concurrency"},
		{"negative account concurrency", &DelivererOptions{AccountConcurrency: -1}, "account concurrency"},
		{"host concurrency", &DelivererOptions{HostConcurrency: MaxConcurrency + 1}, "host concurrency"},
		{"negative host concurrency", &DelivererOptions{HostConcurrency: -1}, "host concurrency"},
		{"the most host concurrency", &DelivererOptions{HostConcurrency: MaxConcurrency}, ""},
		{"shares past the concurrency", &DelivererOptions{Concurrency: 1, EndpointConcurrency: MaxConcurrency, AccountConcurrency: MaxConcurrency}, ""},
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
	if d.perEndpoint != DefaultEndpointConcurrency || d.perAccount != DefaultAccountConcurrency || d.perHost != DefaultHostConcurrency {
		t.Errorf("shares %d per endpoint, %d per account, %d per host", d.perEndpoint, d.perAccount, d.perHost)
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
	// The shares never take more than the concurrency, nor an endpoint more than its
	// account or its host.
	for _, tt := range []struct{ c, e, a, h, wantE, wantA, wantH int }{
		{0, 0, 0, 0, 2, 4, 4},
		{3, 0, 0, 0, 2, 3, 3},
		{1, 0, 0, 0, 1, 1, 1},
		{8, 6, 0, 0, 4, 4, 4},
		{16, 6, 10, 0, 4, 10, 4},
		{16, 6, 10, 8, 6, 10, 8},
		{16, 20, 10, 12, 10, 10, 12},
		{16, 0, 0, 1, 1, 4, 1},
		{16, 0, 0, 20, 2, 4, 16},
	} {
		d, err := NewDeliverer(nopStore{}, &DelivererOptions{Concurrency: tt.c, EndpointConcurrency: tt.e, AccountConcurrency: tt.a, HostConcurrency: tt.h})
		if err != nil {
			t.Fatal(err)
		}
		if d.perEndpoint != tt.wantE || d.perAccount != tt.wantA || d.perHost != tt.wantH {
			t.Errorf("concurrency %d, shares %d, %d and %d: %d per endpoint, %d per account, %d per host; want %d, %d and %d",
				tt.c, tt.e, tt.a, tt.h, d.perEndpoint, d.perAccount, d.perHost, tt.wantE, tt.wantA, tt.wantH)
		}
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
		{"one did not answer", func() (bool, time.Time) { b.done("h", false, t0, t0.Add(15*time.Second)); return true, none }, true, none},
		{"then none is admitted, until the cooldown's end", admit(29 * time.Second), false, at(30 * time.Second)},
		{"another host is", func() (bool, time.Time) { return b.admit("other", t0) }, true, none},
		{"after the cooldown, one is", admit(30 * time.Second), true, none},
		{"but only one: the next is held a cooldown", admit(31 * time.Second), false, at(61 * time.Second)},
		{"it is abandoned", func() (bool, time.Time) { b.abandon("h"); return true, none }, true, none},
		{"so another one is", admit(32 * time.Second), true, none},
		{"which does not answer", func() (bool, time.Time) {
			b.done("h", false, at(40*time.Second), at(55*time.Second))
			return true, none
		}, true, none},
		{"the cooldown starts again", admit(60 * time.Second), false, at(70 * time.Second)},
		{"one is, after it", admit(70 * time.Second), true, none},
		{"which is answered", func() (bool, time.Time) { b.done("h", true, at(70*time.Second), at(71*time.Second)); return true, none }, true, none},
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
		at := t0.Add(time.Duration(i) * time.Second)
		b.done(strings.Repeat("x", i%50)+string(rune('a'+i%26))+time.Duration(i).String(), false, at, at)
	}
	if len(b.hosts) > maxBreakers {
		t.Errorf("%d hosts remembered", len(b.hosts))
	}
	// Endpoints that all fail within one cooldown are bounded too; those an attempt
	// is at are kept.
	b = newBreakers(time.Hour)
	for i := range 3 {
		key := breakerKey(fmt.Sprintf("ep_probing%d", i), "h")
		b.done(key, false, t0, t0)
		if ok, _ := b.admit(key, t0.Add(time.Hour)); !ok {
			t.Fatal("a probe after the cooldown was not admitted")
		}
	}
	for i := range 2*maxBreakers + 10 {
		at := t0.Add(time.Hour + time.Duration(i))
		b.done(breakerKey(fmt.Sprintf("ep_%d", i), "hooks.example.com"), false, at, at)
	}
	if len(b.hosts) > maxBreakers {
		t.Errorf("%d endpoints remembered, all within their cooldown", len(b.hosts))
	}
	for i := range 3 {
		if br := b.hosts[breakerKey(fmt.Sprintf("ep_probing%d", i), "h")]; br == nil || !br.probing {
			t.Errorf("the breaker of probing endpoint %d was forgotten", i)
		}
	}
}

// TestBreakersKeepSlowHolds: endpoints made to fail quickly, in any number, cannot push
// out the holds of the endpoints whose attempts held their places until the timeout
// (a shared host that does not answer): those are as many as the deliverer's places
// can time out within a cooldown, which fits the memory, and are all kept.
func TestBreakersKeepSlowHolds(t *testing.T) {
	if most := MaxConcurrency*int(hostCooldown/slowFailure+1) + MaxConcurrency; most >= maxBreakers*9/10 {
		t.Fatalf("%d slow holds and probes may be live at once, more than the %d the breakers keep", most, maxBreakers*9/10)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	b := newBreakers(hostCooldown)
	// The most slow failures a deliverer of the most concurrency can have within a
	// cooldown: each of its places times out every slowFailure, interleaved with a
	// flood of endpoints that fail at once.
	slow := map[string]time.Time{} // by key, when its attempt was made
	at := t0
	for range hostCooldown / slowFailure {
		for p := range MaxConcurrency {
			key := breakerKey(fmt.Sprintf("ep_dead%d", len(slow)), "hooks.example.com")
			b.done(key, false, at, at.Add(slowFailure))
			slow[key] = at
			for q := range 20 {
				quick := breakerKey(fmt.Sprintf("ep_flood%d_%d_%d", at.Unix(), p, q), fmt.Sprintf("flood%d.example.net", q))
				b.done(quick, false, at.Add(slowFailure), at.Add(slowFailure))
			}
		}
		at = at.Add(slowFailure)
	}
	if len(b.hosts) > maxBreakers {
		t.Errorf("%d endpoints remembered", len(b.hosts))
	}
	held := 0
	for key, since := range slow {
		if !at.Before(since.Add(hostCooldown)) {
			continue // its cooldown passed: forgotten, or probed once
		}
		held++
		if ok, _ := b.admit(key, at); ok {
			t.Fatalf("the hold of %q, which timed out within the cooldown, was forgotten for the flood", key)
		}
	}
	if held < len(slow)*9/10 {
		t.Errorf("%d of %d slow holds checked", held, len(slow))
	}
}

// TestHostLane: the endpoints on one host share its lane, whatever the spelling of
// their URLs' hosts.
func TestHostLane(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"https://hooks.example.com/a", "hooks.example.com:443"},
		{"https://HOOKS.Example.com./b?x=1", "hooks.example.com:443"},
		{"https://hooks.example.com:443/c", "hooks.example.com:443"},
		{"https://hooks.example.com:0443/c", "hooks.example.com:443"},
		{"http://hooks.example.com/d", "hooks.example.com:80"},
		{"https://hooks.example.com:8443/e", "hooks.example.com:8443"},
		{"https://[2001:DB8::1]/f", "[2001:db8::1]:443"},
		{"https://[::ffff:192.0.2.1]:443/g", "192.0.2.1:443"},
		{"https://192.0.2.1/h", "192.0.2.1:443"},
		{"/relative", ""},
		{"://bad", ""},
	} {
		got := strings.TrimPrefix(hostLane(tt.url), "h\x00")
		if got != tt.want {
			t.Errorf("hostLane(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

// TestHostLaneShare: a host's lane takes its share of attempts, whichever endpoints
// and accounts they are for, and one account at most all but one of them; an
// endpoint of the host none of whose attempts ended expects the host's pace, but does
// not go behind its line, which other accounts share.
func TestHostLaneShare(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ls := newLanes(15*time.Second, 2, 4, 3)
	host := hostLane("https://hooks.example.com/x")
	a, b, c := accountLane("a"), accountLane("b"), accountLane("c")
	for i, tt := range []struct {
		account, want string
	}{
		{a, ""},
		{a, ""},
		{a, a}, // all but one of the host's 3 places: given back on its account's lane
		{b, ""},
		{c, host}, // the host is full
		{b, host},
	} {
		if got := ls.enterHost(host, tt.account, t0); got != tt.want {
			t.Fatalf("attempt %d, of %q, at a host (3 places): %q, want %q", i+1, tt.account, got, tt.want)
		}
	}
	// b's attempt ends, entered at the same instant as a's: b's place is freed, not
	// one of a's, which still holds its part.
	ls.leave(host, b, t0, 15*time.Second) // a timeout: the host's pace
	if got := ls.enterHost(host, a, t0); got != a {
		t.Fatalf("a at the host after b left: %q, want %q", got, a)
	}
	if got := ls.enterHost(host, c, t0); got != "" {
		t.Fatalf("a place left at the host: %q", got)
	}
	if due := ls.park(host, t0, time.Time{}, 0, 0, 0, 0); !due.Equal(t0.Add(15 * time.Second)) {
		t.Errorf("parked on the host's lane: +%s, want +15s", due.Sub(t0))
	}
	ep := endpointLane("ep_new")
	ls.enter(ep, t0)
	ls.owns(ep, accountLane("acme"), host)
	if due := ls.park(ep, t0, time.Time{}, 0, 0, 0, 0); !due.Equal(t0.Add(15 * time.Second)) {
		t.Errorf("parked on the endpoint's lane: +%s, want +15s, the host's pace", due.Sub(t0))
	}
	// Only one place at a host: any account may take it.
	one := newLanes(15*time.Second, 1, 4, 1)
	if got := one.enterHost(host, a, t0); got != "" {
		t.Errorf("the one place of a host: %q", got)
	}
}

// TestParkSpread: a backlog given back beyond MaxPark comes due spread over the whole
// window, not together at its end; and each delivery, given back again when it comes
// due, is due a MaxPark later: the backlog stays spread, each given back about once
// per MaxPark.
func TestParkSpread(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 7, 0, time.UTC)
	const n, slice = 5000, 10 * time.Second
	ls := newLanes(15*time.Second, 2, 4, 4)
	ep := endpointLane("ep_backlog")
	ls.enter(ep, t0)
	ls.leave(ep, "", t0, 15*time.Second) // an endpoint that takes the timeout: 7.5 s apart
	due := make(map[string]time.Time, n)
	bySlice := map[int64]int{}
	for i := range n {
		msg := fmt.Sprintf("msg_%d", i)
		// given back over a second, without jitter
		now := t0.Add(time.Duration(i) * time.Second / n)
		d := ls.park(ep, now, time.Time{}, 0, 0, 0, parkPhase("ep_backlog", msg))
		if d.Before(now) || d.After(now.Add(MaxPark)) {
			t.Fatalf("%s given back at +%s is due at +%s, beyond MaxPark", msg, now.Sub(t0), d.Sub(t0))
		}
		due[msg] = d
		bySlice[int64(d.Sub(t0)/slice)]++
	}
	most := 0
	for _, k := range bySlice {
		most = max(most, k)
	}
	// Spread evenly, a 10 s slice of the 5 minutes holds 1/30 of them.
	if bound := 2 * n * int(slice) / int(MaxPark); most > bound {
		t.Errorf("%d of %d deliveries due in one %s slice, want at most %d; by slice %v", most, n, slice, bound, bySlice)
	}
	// Each comes due, in the order of their due times, and is given back again at
	// once: due a MaxPark later, but for a few that go in the lane's line.
	msgs := slices.Collect(maps.Keys(due))
	slices.SortFunc(msgs, func(a, b string) int { return due[a].Compare(due[b]) })
	again := 0
	for _, msg := range msgs {
		d := due[msg]
		next := ls.park(ep, d, time.Time{}, 0, 0, 0, parkPhase("ep_backlog", msg))
		if !next.Equal(d.Add(MaxPark)) {
			again++
		}
	}
	if again > n/100 {
		t.Errorf("%d of %d deliveries given back again are not due a MaxPark later", again, n)
	}
}

// TestBreakerPerEndpoint: one endpoint that did not answer holds back no other
// endpoint on its host, and an endpoint moved to another host starts afresh.
func TestBreakerPerEndpoint(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	b := newBreakers(30 * time.Second)
	b.done(breakerKey("ep_a", "hooks.example.com"), false, t0, t0)
	for _, tt := range []struct {
		key  string
		want bool
	}{
		{breakerKey("ep_a", "hooks.example.com"), false},
		{breakerKey("ep_b", "hooks.example.com"), true},
		{breakerKey("ep_a", "hooks.example.org"), true},
	} {
		if ok, _ := b.admit(tt.key, t0.Add(time.Second)); ok != tt.want {
			t.Errorf("%q admitted %v, want %v", tt.key, ok, tt.want)
		}
	}
}

// TestLanes: places are taken and given back per lane; the deliveries given back are
// due when the lane may have a place, each behind the one before, at most MaxPark on.
func TestLanes(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ls := newLanes(15*time.Second, 2, 3, 4)
	ep, other, acct := endpointLane("ep_a"), endpointLane("ep_b"), accountLane("acme")
	// Places.
	for i, want := range []bool{true, true, false} {
		if got := ls.enter(ep, t0); got != want {
			t.Fatalf("an endpoint's lane (2 places) took attempt %d: %v", i+1, got)
		}
	}
	if !ls.enter(other, t0) {
		t.Fatal("one endpoint's attempts took another's place")
	}
	for i := range 3 {
		if !ls.enter(acct, t0) {
			t.Fatalf("the account's lane refused attempt %d", i+1)
		}
	}
	if ls.enter(acct, t0) {
		t.Fatal("the account's lane took a 4th attempt")
	}
	ls.owns(ep, acct, "")
	// Parks on the endpoint's lane, no attempt ended yet: the first is due after
	// twice what the oldest in flight has run (at least minAttempt), the next behind
	// it by half that (2 places).
	steps := []struct {
		name          string
		now           time.Duration
		atLeast, want time.Time
		step          time.Duration
		jitter, r     float64
		phase         time.Duration
		key           string
		leave         bool // leave one of ep's places, taken at t0, after 10 s, first
	}{
		{name: "nothing known", now: 0, key: ep, want: at(minAttempt)},
		{name: "behind it", now: 0, key: ep, want: at(minAttempt + minAttempt/2)},
		{name: "in flight for 4s: 8s expected, behind the line", now: 4 * time.Second, key: ep, want: at(12 * time.Second)},
		{name: "and then 4s apart", now: 4 * time.Second, key: ep, want: at(16 * time.Second)},
		{name: "an attempt took 10s; the other has run 11s: a timeout (15s) expected", now: 11 * time.Second, key: ep, leave: true, want: at(26 * time.Second)},
		{name: "held back until later", now: 11 * time.Second, key: ep, step: 30 * time.Second, atLeast: at(time.Minute), want: at(time.Minute)},
		{name: "jitter moves it later by a part of a step", now: 11 * time.Second, key: ep, step: 10 * time.Second, jitter: 0.5, r: 0.5, want: at(time.Minute + 10*time.Second + 2500*time.Millisecond)},
		// t0 is a whole number of MaxParks since 1970, so phase p falls on t0+p.
		{name: "beyond MaxPark: at its phase, from when the lane may have a place", now: 11 * time.Second, key: ep, step: 10 * time.Minute, phase: 3 * time.Minute, want: at(3 * time.Minute)},
		{name: "a phase before then: in the next window", now: 11 * time.Second, key: ep, step: 10 * time.Minute, phase: 5 * time.Second, want: at(MaxPark + 5*time.Second)},
		{name: "a phase more than MaxPark on: its place in this window", now: 11 * time.Second, key: ep, step: 10 * time.Minute, phase: 20 * time.Second, want: at(20 * time.Second)},
		{name: "the jitter does not move it", now: 11 * time.Second, key: ep, step: 10 * time.Minute, jitter: 0.2, r: 0.5, phase: time.Minute, want: at(time.Minute)},
		{name: "the lane's line is at MaxPark on: the next beyond it is spread too", now: 11 * time.Second, key: ep, phase: 2 * time.Minute, want: at(2 * time.Minute)},
		{name: "the account's lane: its own line", now: 11 * time.Second, key: acct, want: at(26 * time.Second)},
		{name: "its next, 5s behind (3 places)", now: 11 * time.Second, key: acct, want: at(31 * time.Second)},
		{name: "an endpoint of the account goes behind the account's line", now: 11 * time.Second, key: other, want: at(31 * time.Second)},
		{name: "a jitter past MaxPark on is cut to it", now: 11 * time.Second, key: acct, atLeast: at(11*time.Second + MaxPark - time.Second), step: 10 * time.Second, jitter: 0.5, r: 0.9, want: at(11*time.Second + MaxPark)},
	}
	for _, s := range steps {
		if s.leave {
			ls.leave(ep, "", t0, 10*time.Second)
			ls.leave(acct, "", t0, 10*time.Second)
		}
		if s.key == other {
			ls.owns(other, acct, "")
		}
		got := ls.park(s.key, at(s.now), s.atLeast, s.step, s.jitter, s.r, s.phase)
		if !got.Equal(s.want) {
			t.Fatalf("%s: due at +%s, want +%s", s.name, got.Sub(t0), s.want.Sub(t0))
		}
	}
	// The deliverer wakes up for the earliest due time after its last claim.
	if next, ok := ls.next(at(time.Second)); !ok || !next.Equal(at(12*time.Second)) {
		t.Errorf("next after +1s: +%s, %v", next.Sub(t0), ok)
	}
	if next, ok := ls.next(at(time.Hour)); ok {
		t.Errorf("next after an hour: +%s", next.Sub(t0))
	}
}

// TestLanesBounded: a deliverer remembers at most maxLanes lanes, keeping those with
// attempts in flight, and at most maxParks due times.
func TestLanesBounded(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ls := newLanes(15*time.Second, 2, 4, 4)
	if !ls.enter(endpointLane("ep_busy"), t0) {
		t.Fatal("no place")
	}
	for i := range 3 * maxLanes {
		ls.park(endpointLane(fmt.Sprintf("ep_%d", i)), t0, time.Time{}, 0, 0, 0, 0)
	}
	if len(ls.m) > maxLanes {
		t.Errorf("%d lanes remembered", len(ls.m))
	}
	if l := ls.m[endpointLane("ep_busy")]; l == nil || len(l.starts) != 1 {
		t.Error("a lane with an attempt in flight was forgotten")
	}
	if len(ls.parks) > maxParks {
		t.Errorf("%d due times remembered", len(ls.parks))
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
