package journal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
)

var t0 = time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)

// TestEncodeDecode checks that a change comes back from its entry as it was, every
// field of every kind of change, and that the entry is named and timed by the change.
func TestEncodeDecode(t *testing.T) {
	full := event.Change{ID: "c1", At: t0, Actor: event.Actor{ID: "operator:alice", Addr: netip.MustParseAddr("2001:db8::7")},
		Account: "acme", Key: "key_ci", Session: "s_1", Endpoint: "ep_1", URL: "https://hooks.example.com/x",
		Plan: "pro", OldPlan: "free", Effective: t0.Add(time.Hour), Credits: -42, Expires: t0.Add(48 * time.Hour),
		Reason: "order 1042 — ünïcode", Before: json.RawMessage(`{"apis":["a"]}`), After: json.RawMessage(`{"apis":["a","b"]}`),
		OldName: "ci", Name: "deploys"}
	for _, k := range event.Kinds() {
		switch k {
		case event.CallFinished, event.CallRefused, event.ReservationsVoided:
			continue
		}
		for _, c := range []event.Change{{Type: k, ID: "bare", At: t0}, withType(full, k)} {
			e, err := journal.Encode(&c)
			if err != nil {
				t.Fatalf("Encode(%s): %v", k, err)
			}
			if e.ID != c.ID || !e.At.Equal(c.At) {
				t.Errorf("Encode(%s): entry %q at %v, want %q at %v", k, e.ID, e.At, c.ID, c.At)
			}
			got, err := journal.Decode(e)
			if err != nil {
				t.Fatalf("Decode(%s): %v", k, err)
			}
			if !reflect.DeepEqual(*got, c) {
				t.Errorf("Decode(Encode(%s)):\n got %+v\nwant %+v", k, *got, c)
			}
		}
	}
}

func withType(c event.Change, k event.Kind) event.Change {
	c.Type = k
	return c
}

// TestEncodeRefuses checks that a change an entry cannot hold is refused as invalid.
func TestEncodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    event.Change
	}{
		{"no id", event.Change{Type: event.KeyRotated, At: t0}},
		{"no time", event.Change{Type: event.KeyRotated, ID: "x"}},
		{"a call", event.Change{Type: event.CallFinished, ID: "x", At: t0}},
		{"no kind", event.Change{ID: "x", At: t0}},
		{"too long", event.Change{Type: event.KeyRotated, ID: "x", At: t0, Reason: strings.Repeat("r", journal.MaxChange)}},
	} {
		if _, err := journal.Encode(&tc.c); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Encode of a change with %s: %v, want store.ErrInvalid", tc.name, err)
		}
	}
}

// TestDecodeRefuses checks that an entry that is not a change of this release's form is
// ErrUnreadable.
func TestDecodeRefuses(t *testing.T) {
	good, err := journal.Encode(&event.Change{Type: event.KeyRotated, ID: "x", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change string
		id     string
	}{
		{"not JSON", "\x00\xff", "x"},
		{"a later version", `{"v":2,"type":"key.rotated","id":"x"}`, "x"},
		{"an unknown kind", `{"v":1,"type":"key.melted","id":"x"}`, "x"},
		{"a call", `{"v":1,"type":"call.finished","id":"x"}`, "x"},
		{"another id", string(good.Change), "y"},
	} {
		_, err := journal.Decode(journal.Entry{ID: tc.id, At: t0, Change: []byte(tc.change)})
		if !errors.Is(err, journal.ErrUnreadable) {
			t.Errorf("Decode of %s: %v, want ErrUnreadable", tc.name, err)
		}
	}
}

// TestWithFrom checks that an entry given to a context is the one a store finds, that
// a context without one has none, and that an invalid one is refused.
func TestWithFrom(t *testing.T) {
	ctx := context.Background()
	if e, err := journal.From(ctx); e != nil || err != nil {
		t.Errorf("From of a context without an entry: %v, %v; want nil, nil", e, err)
	}
	want := journal.Entry{ID: "x", At: t0, Change: []byte("c")}
	e, err := journal.From(journal.With(ctx, want))
	if err != nil || e == nil || e.ID != want.ID || !e.At.Equal(want.At) || !bytes.Equal(e.Change, want.Change) {
		t.Errorf("From(With(entry)) = %+v, %v; want %+v", e, err, want)
	}
	bad := want
	bad.Change = nil
	if _, err := journal.From(journal.With(ctx, bad)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("From of an entry without a change: %v, want store.ErrInvalid", err)
	}
}

// recorder is an observer that records the changes it is told of, and defers those
// whose IDs defer names.
type recorder struct {
	mu     sync.Mutex
	seen   []string
	defers map[string]bool
}

func (r *recorder) Observe(_ context.Context, e event.Event) {
	c := e.(*event.Change)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, c.ID)
	if r.defers[c.ID] {
		c.Defer()
	}
}

func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// record records a rotation made at at, with id, in the key store's journal, with the
// creation of an account of its own.
func record(t *testing.T, ks *memory.KeyStore, id string, at time.Time) {
	t.Helper()
	c := event.Change{Type: event.KeyRotated, ID: id, At: at, Account: "a-" + id, Key: "key_" + id}
	e, err := journal.Encode(&c)
	if err != nil {
		t.Fatal(err)
	}
	a, k := account(id, at)
	if err := ks.CreateAccount(journal.With(t.Context(), e), a, k); err != nil {
		t.Fatal(err)
	}
}

// account returns an account of its own and its primary key, for record.
func account(id string, at time.Time) (auth.Account, auth.Key) {
	return auth.Account{ID: "a-" + id, Plan: "p", CreatedAt: at},
		auth.Key{ID: "key_" + id, AccountID: "a-" + id, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: at}
}

// relayOn returns a relay of the key store's journal on a bus that tells rec, on clk.
func relayOn(t *testing.T, ks *memory.KeyStore, rec *recorder, clk *testenv.Clock, opts journal.RelayOptions) *journal.Relay {
	t.Helper()
	var bus event.Bus
	bus.Subscribe(rec)
	opts.Now = clk.Now
	r, err := journal.NewRelay(&bus, []journal.Store{ks}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRelay checks a relay's rounds: the entries older than the grace are published,
// oldest first, with their IDs, and removed; younger ones wait; a round publishes at
// most Round entries, in pages.
func TestRelay(t *testing.T) {
	ks := memory.NewKeyStore()
	for i := range 7 {
		record(t, ks, fmt.Sprintf("c%d", i), t0.Add(time.Duration(i)*time.Second))
	}
	rec := &recorder{}
	clk := testenv.NewClock(t0.Add(time.Minute + 3*time.Second)) // c0 .. c2 are older than the grace
	r := relayOn(t, ks, rec, clk, journal.RelayOptions{Grace: time.Minute, Page: 2, Round: 5})
	n, err := r.Relay(t.Context())
	if err != nil || n != 3 {
		t.Fatalf("first round: %d, %v; want 3 published", n, err)
	}
	if got := rec.ids(); !slices.Equal(got, []string{"c0", "c1", "c2"}) {
		t.Errorf("first round published %q, want c0, c1, c2", got)
	}
	clk.Set(t0.Add(time.Hour))
	if n, err := r.Relay(t.Context()); err != nil || n != 4 {
		t.Fatalf("second round: %d, %v; want the 4 others", n, err)
	}
	if n, err := r.Relay(t.Context()); err != nil || n != 0 {
		t.Fatalf("third round: %d, %v; want none left", n, err)
	}
	if got := rec.ids(); !slices.Equal(got, []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6"}) {
		t.Errorf("published %q, want each once, in order", got)
	}
	if s := r.Stats(); s.Published != 7 || s.Deferred != 0 || s.Dropped != 0 {
		t.Errorf("Stats = %+v, want 7 published", s)
	}
	// The round limit: 5 at most.
	for i := range 7 {
		record(t, ks, fmt.Sprintf("d%d", i), t0)
	}
	if n, _ := r.Relay(t.Context()); n != 5 {
		t.Errorf("a round of 7 due entries published %d, want Round, 5", n)
	}
}

// TestRelayDeferred checks that an entry an observer defers is left in the journal, the
// round stops there, the relay backs off, and once the observer stores it, it is
// published again and removed.
func TestRelayDeferred(t *testing.T) {
	ks := memory.NewKeyStore()
	record(t, ks, "a", t0)
	record(t, ks, "b", t0.Add(time.Second))
	record(t, ks, "c", t0.Add(2*time.Second))
	rec := &recorder{defers: map[string]bool{"b": true}}
	clk := testenv.NewClock(t0.Add(time.Hour))
	r := relayOn(t, ks, rec, clk, journal.RelayOptions{Lease: time.Minute})
	if n, err := r.Relay(t.Context()); err != nil || n != 1 {
		t.Fatalf("round with b deferred: %d, %v; want a published", n, err)
	}
	if got := rec.ids(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("told %q, want a, then b (deferred), and not c", got)
	}
	// Backing off: a lease, then twice as long.
	clk.Set(t0.Add(time.Hour + 59*time.Second))
	if n, _ := r.Relay(t.Context()); n != 0 || len(rec.ids()) != 2 {
		t.Errorf("a round within the backoff told %q", rec.ids())
	}
	clk.Set(t0.Add(time.Hour + time.Minute))
	r.Relay(t.Context())
	if got := rec.ids(); !slices.Equal(got, []string{"a", "b", "b"}) {
		t.Errorf("after the first backoff, told %q, want b again", got)
	}
	clk.Set(t0.Add(time.Hour + 2*time.Minute + 59*time.Second))
	if r.Relay(t.Context()); len(rec.ids()) != 3 {
		t.Errorf("a round within the doubled backoff told %q", rec.ids())
	}
	rec.mu.Lock()
	rec.defers = nil // the observer's store is back
	rec.mu.Unlock()
	clk.Set(t0.Add(time.Hour + 3*time.Minute))
	if n, err := r.Relay(t.Context()); err != nil || n != 2 {
		t.Fatalf("round once the observer stores: %d, %v; want b and c", n, err)
	}
	if got := rec.ids(); !slices.Equal(got, []string{"a", "b", "b", "b", "c"}) {
		t.Errorf("told %q, want b once more, then c", got)
	}
	if n, _ := r.Relay(t.Context()); n != 0 {
		t.Errorf("a round after all were stored published %d", n)
	}
	if s := r.Stats(); s.Published != 3 || s.Deferred != 2 {
		t.Errorf("Stats = %+v, want 3 published, 2 deferred", s)
	}
}

// TestRelayDrops checks that an entry older than MaxAge, or unreadable, is removed
// unpublished and logged at ERROR with what it held.
func TestRelayDrops(t *testing.T) {
	ks := memory.NewKeyStore()
	record(t, ks, "old", t0)
	record(t, ks, "new", t0.Add(71*time.Hour))
	a, k := account("junk", t0)
	if err := ks.CreateAccount(journal.With(t.Context(), journal.Entry{ID: "junk", At: t0, Change: []byte("junk")}), a, k); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	rec := &recorder{}
	clk := testenv.NewClock(t0.Add(72*time.Hour + time.Second))
	var bus event.Bus
	bus.Subscribe(rec)
	r, err := journal.NewRelay(&bus, []journal.Store{ks}, &journal.RelayOptions{Now: clk.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Relay(t.Context()); err != nil || n != 1 {
		t.Fatalf("round: %d, %v; want new published", n, err)
	}
	if got := rec.ids(); !slices.Equal(got, []string{"new"}) {
		t.Errorf("published %q, want new only", got)
	}
	out := logs.String()
	for _, want := range []string{"level=ERROR", "id=old", "type=key.rotated", "account=a-old", "id=junk"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
	if s := r.Stats(); s.Dropped != 2 {
		t.Errorf("Stats = %+v, want 2 dropped", s)
	}
	clk.Set(t0.Add(1000 * time.Hour))
	if n, _ := r.Relay(t.Context()); n != 0 {
		t.Errorf("the dropped entries were published later: %d", n)
	}
}

// TestRelayLeavesUnreadable checks that an entry this release cannot read (a later
// release wrote it) is left in the journal, neither published nor removed, counted at
// each claim and logged at WARN once, without holding back the entries after it; and
// that it is removed once older than MaxAge.
func TestRelayLeavesUnreadable(t *testing.T) {
	ks := memory.NewKeyStore()
	later := []byte(`{"v":2,"type":"key.rotated","id":"later"}`) // a form of a later release
	a, k := account("later", t0)
	if err := ks.CreateAccount(journal.With(t.Context(), journal.Entry{ID: "later", At: t0, Change: later}), a, k); err != nil {
		t.Fatal(err)
	}
	record(t, ks, "after", t0.Add(time.Second))
	var logs testenv.Logs
	rec := &recorder{}
	clk := testenv.NewClock(t0.Add(time.Hour))
	r := relayOn(t, ks, rec, clk, journal.RelayOptions{Lease: time.Minute, Logger: logs.Logger()})
	if n, err := r.Relay(t.Context()); err != nil || n != 1 {
		t.Fatalf("round: %d, %v; want the entry after the unreadable one published", n, err)
	}
	if got := rec.ids(); !slices.Equal(got, []string{"after"}) {
		t.Errorf("published %q, want after only", got)
	}
	// Claimed again at each lease's end, never published, logged once.
	for i := 1; i <= 3; i++ {
		clk.Set(t0.Add(time.Hour + time.Duration(i)*time.Minute))
		if n, err := r.Relay(t.Context()); err != nil || n != 0 {
			t.Fatalf("round %d: %d, %v; want nothing published", i, n, err)
		}
	}
	if s := r.Stats(); s.Unreadable != 4 || s.Dropped != 0 || s.Published != 1 {
		t.Errorf("Stats = %+v, want 1 published, the unreadable entry counted at each of its 4 claims", s)
	}
	var warned int
	for _, l := range logs.Records(t) {
		if l.Attrs["id"] == "later" {
			warned++
			if l.Level != "WARN" || !strings.Contains(l.Msg, "left in the journal") {
				t.Errorf("the unreadable entry was logged %s %q, want a WARN that it is left", l.Level, l.Msg)
			}
		}
	}
	if warned != 1 {
		t.Errorf("the unreadable entry was logged %d times, want once", warned)
	}
	// Still in the journal, for a relay of the release that wrote it.
	es, err := ks.Claim(t.Context(), t0.Add(time.Hour), t0.Add(2*time.Hour), time.Minute, journal.MaxClaim)
	if err != nil || len(es) != 1 || es[0].ID != "later" || !bytes.Equal(es[0].Change, later) {
		t.Fatalf("the journal holds %+v (%v), want the unreadable entry as it was", es, err)
	}
	// Past MaxAge, removed and logged at ERROR.
	clk.Set(t0.Add(journal.DefaultMaxAge + time.Second))
	if n, err := r.Relay(t.Context()); err != nil || n != 0 {
		t.Fatalf("round past MaxAge: %d, %v", n, err)
	}
	if s := r.Stats(); s.Dropped != 1 {
		t.Errorf("Stats = %+v, want the unreadable entry dropped past MaxAge", s)
	}
	if es, _ := ks.Claim(t.Context(), clk.Now(), clk.Now().Add(time.Hour), time.Minute, journal.MaxClaim); len(es) != 0 {
		t.Errorf("the journal still holds %+v past MaxAge", es)
	}
	if rs := logs.Records(t); rs[len(rs)-1].Level != "ERROR" || rs[len(rs)-1].Attrs["id"] != "later" {
		t.Errorf("the last log is %+v, want the unreadable entry's removal at ERROR", rs[len(rs)-1])
	}
}

// TestNewRelayRefuses checks the options a relay refuses, RelayOptions.Check's.
func TestNewRelayRefuses(t *testing.T) {
	var bus event.Bus
	for _, o := range []journal.RelayOptions{{Grace: -1}, {Lease: -1}, {Page: journal.MaxClaim + 1}, {Round: -1},
		{Grace: time.Hour, MaxAge: time.Hour}, {MaxAge: journal.DedupWindow}, {MaxAge: journal.DedupWindow + time.Hour},
		{Grace: journal.DedupWindow}} {
		if err := o.Check(); err == nil {
			t.Errorf("Check(%+v) accepted", o)
		}
		if _, err := journal.NewRelay(&bus, nil, &o); err == nil {
			t.Errorf("NewRelay(%+v) accepted", o)
		}
	}
	for _, o := range []journal.RelayOptions{{}, {MaxAge: journal.DedupWindow - time.Nanosecond}, {Page: journal.MaxClaim}} {
		if err := o.Check(); err != nil {
			t.Errorf("Check(%+v): %v", o, err)
		}
	}
	if _, err := journal.NewRelay(nil, nil, nil); err == nil {
		t.Error("NewRelay without a bus accepted")
	}
}
