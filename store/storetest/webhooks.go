package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/webhook"
)

// TestWebhooks checks that a [webhook.Store] keeps endpoints and the outbox as the
// interface documents: endpoints read back intact, listed oldest first, changed at the
// revision they were read at and bounded per account and for the operator; a message
// enqueued once by its ID, all or nothing, with one pending delivery per endpoint that
// exists and has room; deliveries claimed when due, earliest first, by one claim at a
// time (also when many claim at once), claimed again when a lease ends without an
// outcome; outcomes recorded only with the claim that holds the delivery; listings
// newest first, page by page; resends, the pending count, prunes; and values a store
// cannot hold refused alike by every store.
//
// The bound on an endpoint's pending deliveries is checked at webhook.MaxPending, or at
// the store's own bound if it has a method MaxPending() int (a store configured with a
// lower bound, so that the check needs fewer writes). Some rows enqueue up to
// [MinPendingBound] messages for one endpoint: a lower bound fails them.
//
// newStore is called once per subtest and must return an empty store (the operator's
// endpoints and Pending count the whole store); it registers any teardown with
// t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestWebhooks(t *testing.T, newStore func(t *testing.T) webhook.Store) {
	t.Helper()
	run(t, newStore, webhookRows)
}

var webhookRows = []behaviour[webhook.Store]{
	{"EndpointCreateRead",
		"CreateEndpoint stores the endpoint at Revision 1 and Endpoint returns it with every field intact; a taken ID is store.ErrConflict; an unknown ID is store.ErrNotFound.",
		whEndpointCreateRead},
	{"EndpointsOldestFirst",
		"Endpoints lists an account's endpoints oldest first (by Created, then ID), the operator's (account \"\") apart from every account's, and none for an account without any.",
		whEndpointsOldestFirst},
	{"EndpointUpdate",
		"UpdateEndpoint at the stored revision replaces every field but ID, Account and Created and raises the revision by one; at another revision it is store.ErrConflict, for an unknown ID store.ErrNotFound, and changes nothing.",
		whEndpointUpdate},
	{"EndpointDisabledBy",
		"Who disabled an endpoint (DisabledBy) is stored with it, by CreateEndpoint and UpdateEndpoint, read back as stored, and cleared with Disabled; a DisabledBy none of the values, or on an enabled endpoint, is store.ErrInvalid and changes nothing.",
		whEndpointDisabledBy},
	{"EndpointConcurrentUpdate",
		"Of many updates at once at one revision, exactly one is taken; the others are store.ErrConflict.",
		whEndpointConcurrentUpdate},
	{"EndpointDelete",
		"DeleteEndpoint deletes the endpoint and its deliveries, pending, claimed or finished: they are no longer listed, claimed, recorded, resent or counted; the messages stay remembered; deleting it again is store.ErrNotFound.",
		whEndpointDelete},
	{"EndpointBound",
		"An account has at most MaxEndpoints endpoints, and the operator MaxEndpoints of its own: one more is ErrTooManyEndpoints (store.ErrConflict) and stores nothing; a deletion makes room again.",
		whEndpointBound},
	{"EndpointBoundConcurrent",
		"Of many creations at once for one account, exactly MaxEndpoints are taken; the others are ErrTooManyEndpoints.",
		whEndpointBoundConcurrent},
	{"Enqueue",
		"Enqueue stores the message, byte for byte, with one pending delivery due at now for each endpoint (one for an endpoint named twice), with no attempt, and reports it fresh.",
		whEnqueue},
	{"EnqueueOnce",
		"Enqueuing an ID the store remembers is not fresh, drops nothing and changes nothing, whatever the message and the endpoints say; a message enqueued for no endpoint is remembered too.",
		whEnqueueOnce},
	{"EnqueueOnceUntilKeep",
		"A message is remembered while it has deliveries and until its Keep: enqueued again after its deliveries were pruned, before Keep, it is not fresh; a Prune after Keep (the same one that pruned its last delivery, or a later one) forgets it and its ID is fresh again; a message with a pending delivery is kept past Keep.",
		whEnqueueOnceUntilKeep},
	{"EnqueueDropsUnknown",
		"An endpoint that does not exist gets no delivery and is listed in dropped, in the order given; the others get theirs.",
		whEnqueueDropsUnknown},
	{"EnqueueBound",
		"An endpoint with MaxPending pending deliveries (claimed ones count) gets none and is listed in dropped, while the others get theirs; once one is delivered it gets the next.",
		whEnqueueBound},
	{"EnqueueBoundConcurrent",
		"Of many messages enqueued at once for an endpoint with room for three, exactly three get a delivery; the endpoint never passes MaxPending.",
		whEnqueueBoundConcurrent},
	{"EnqueueBoundManyAccounts",
		"Of many messages of many accounts enqueued at once, each for its account's endpoint and for an operator's endpoint with room for 40, exactly 40 get a delivery to the operator's, and every account's endpoint gets its own; the operator's never passes MaxPending.",
		whEnqueueBoundManyAccounts},
	{"EnqueueAllOrNothing",
		"An Enqueue refused (text a store cannot hold, a body over MaxBody, a bad endpoint ID, an instant out of range, a canceled context) stores nothing: no delivery, and the ID is still fresh.",
		whEnqueueAllOrNothing},
	{"ClaimDue",
		"Claim returns only the deliveries due at now (not a nanosecond before their Due), earliest due first, at most limit, with their messages, one new claim per call and Due at the end of the lease.",
		whClaimDue},
	{"ClaimLeased",
		"A delivery claimed is not claimed again until its lease ends; when it ends without an outcome (a deliverer that died) the delivery is claimed again under a new claim, and the old claim is lost.",
		whClaimLeased},
	{"ClaimConcurrent",
		"Of many claims at once, each due delivery goes to exactly one.",
		whClaimConcurrent},
	{"ClaimBounds",
		"Claim with a limit below 1 or above MaxClaim, or a lease that is not positive, is store.ErrInvalid.",
		whClaimBounds},
	{"RecordOutcome",
		"Record with the claim counts the attempt and stores it (At, Status, Error) and the state: a delivered or failed delivery is no longer pending, due or claimed; a Pending one is due again at its Due, not a nanosecond before; the claim ends with the Record.",
		whRecordOutcome},
	{"RecordClaimLost",
		"Record with a claim that no longer holds the delivery (claimed again after the lease, resent, recorded already, another delivery's, none) is ErrClaimLost (store.ErrConflict) and changes nothing; a Record after the lease with nobody claiming since is taken; an unknown delivery is store.ErrNotFound.",
		whRecordClaimLost},
	{"RecordWithoutAttempt",
		"Record without an attempt (the zero Attempt) ends the claim without counting one: Attempts and Last stay as they were; a Pending one is due again at its Due, not a nanosecond before, a Failed one is no longer pending and is pruned by its last attempt (or its enqueueing); neither moves the endpoint's LastDelivered; a Delivered one, or an attempt with a status or an error but no time, is store.ErrInvalid and changes nothing.",
		whRecordWithoutAttempt},
	{"LastDelivered",
		"A Delivered outcome sets its endpoint's LastDelivered to the attempt's At, and a later success moves it up, never back; other outcomes and other endpoints' successes leave it; it is no change of the endpoint (Revision stays, an update at the revision read is taken); CreateEndpoint stores none and UpdateEndpoint keeps the stored one, whatever they are given.",
		whLastDelivered},
	{"LastDeliveredConcurrent",
		"Of many successes recorded at once for one endpoint, at different times, LastDelivered ends at the latest, whatever the order they are stored in.",
		whLastDeliveredConcurrent},
	{"RecordError",
		"An Attempt.Error longer than MaxError is kept cut to at most MaxError bytes at a character boundary; an outcome a store cannot hold (bad text, no state, a Pending one without Due, no attempt time) is store.ErrInvalid and changes nothing.",
		whRecordError},
	{"DeliveriesPages",
		"Deliveries lists the endpoint's deliveries only, newest message first (by At, then ID, both decreasing), without claims; following Next lists each once and the last page has none; Limit 0 is 20, above 100 or below 0 store.ErrInvalid.",
		whDeliveriesPages},
	{"DeliveriesBadCursor",
		"A cursor no listing returned is ErrBadCursor (store.ErrInvalid); an endpoint that does not exist has an empty page.",
		whDeliveriesBadCursor},
	{"Resend",
		"Resend makes a delivered or failed delivery pending again, due at now, its attempts kept, and returns it; resending a claimed one ends its claim; an unknown delivery is store.ErrNotFound.",
		whResend},
	{"PendingCounts",
		"Pending counts the pending deliveries of every endpoint, claimed or not, and none delivered, failed or deleted.",
		whPendingCounts},
	{"Prune",
		"Prune deletes the delivered and failed deliveries whose last attempt was before the instant, and reports how many; never a pending one, however old.",
		whPrune},
	{"InvalidValues",
		"Text a store cannot hold (invalid UTF-8, a NUL byte), an ID empty or over MaxID bytes, too many types or an instant out of range is store.ErrInvalid from every method, and nothing is stored.",
		whInvalidValues},
	{"SweepClaim",
		"ClaimSweep claims a sweep for one claim until its lease ends: another claim meanwhile is refused (ok false, no error), then taken; a new sweep's position is \"\"; RecordSweep by the claim that holds it stores the position, which the next claim returns, and ends the claim, so that the sweep may be claimed at once; a claim that no longer holds the sweep (another claimed it, or it was recorded) is ErrClaimLost (store.ErrConflict) and stores nothing, while one whose lease ended unclaimed is taken; sweeps of other names are apart.",
		whSweepClaim},
	{"SweepClaimConcurrent",
		"Of many ClaimSweep of one sweep at once, exactly one claims it.",
		whSweepClaimConcurrent},
	{"SweepInvalid",
		"ClaimSweep of a name that is not an ID, or with a lease that is not positive, and RecordSweep of a position longer than MaxPosition or that is not text, are store.ErrInvalid and change nothing.",
		whSweepInvalid},
	{"CanceledContext",
		"Every method given a canceled context returns an error matching context.Canceled and changes nothing.",
		whCanceled},
}

// whLease is the lease of the checks' claims.
const whLease = time.Minute

// MinPendingBound is the lowest bound on an endpoint's pending deliveries (see
// webhook.MaxPending) that a store may be configured with to run [TestWebhooks].
const MinPendingBound = 64

// needRoom stops the check if the store's bound on an endpoint's pending deliveries
// is below n, which the check enqueues for one endpoint.
func needRoom(t *testing.T, s webhook.Store, n int) {
	t.Helper()
	if b := maxPending(s); b < n {
		t.Fatalf("the store keeps at most %d pending deliveries per endpoint; the check enqueues %d for one (configure at least %d)", b, n, MinPendingBound)
	}
}

// whEndpoint returns an endpoint of account named by label, created at t0+created,
// with every field set but those of a rotation and a disabling.
func whEndpoint(n ids, account, label string, created time.Duration) webhook.Endpoint {
	return webhook.Endpoint{
		ID: n.id("ep-" + label), Account: account, URL: "https://hooks.example.com/tollgate/" + label,
		Types: []string{"credits.low", "key.rotated"}, Secret: "whsec_" + label + "c2VjcmV0IHNlY3JldCBzZWNyZXQgc2VjcmV0IQ==",
		Created: at(created),
	}
}

// whMessage returns a message named by label that happened at t0+d, kept a month.
func whMessage(n ids, label string, d time.Duration) webhook.Message {
	return webhook.Message{
		ID: n.id("msg-" + label), Type: "key.rotated", Account: n.id("acct"), At: at(d),
		Body: []byte(`{"type":"key.rotated","timestamp":"2030-01-15T12:00:00Z","data":{"key":"` + label + `","note":"é ✓ \u2028"}}`),
		Keep: at(30 * 24 * time.Hour),
	}
}

func createEndpoint(t *testing.T, s webhook.Store, e webhook.Endpoint) webhook.Endpoint {
	t.Helper()
	got, err := s.CreateEndpoint(t.Context(), e)
	must(t, "CreateEndpoint "+e.ID, err)
	return got
}

// enqueue enqueues m for endpoints at now and checks that it is fresh; it returns what
// was dropped.
func enqueue(t *testing.T, s webhook.Store, m webhook.Message, now time.Time, endpoints ...string) []string {
	t.Helper()
	fresh, dropped, err := s.Enqueue(t.Context(), m, endpoints, now)
	must(t, "Enqueue "+m.ID, err)
	if !fresh {
		t.Fatalf("Enqueue %s: not fresh, want fresh", m.ID)
	}
	return dropped
}

// claimDue claims up to limit deliveries due at now.
func claimDue(t *testing.T, s webhook.Store, now time.Time, limit int) []webhook.Delivery {
	t.Helper()
	ds, err := s.Claim(t.Context(), now, whLease, limit)
	must(t, "Claim", err)
	return ds
}

// claimOne claims the deliveries due at now and checks that there is exactly one.
func claimOne(t *testing.T, s webhook.Store, now time.Time) webhook.Delivery {
	t.Helper()
	ds := claimDue(t, s, now, webhook.MaxClaim)
	if len(ds) != 1 {
		t.Fatalf("Claim at %v: %d deliveries (%s), want 1", now.Sub(t0), len(ds), names(ds))
	}
	return ds[0]
}

// outcome returns the outcome of an attempt at d made at when, in state st (due again
// at due, if Pending).
func outcome(d webhook.Delivery, st webhook.State, when time.Time, status int, why string, due time.Time) webhook.Outcome {
	return webhook.Outcome{Endpoint: d.Endpoint, Message: d.Message.ID, Claim: d.Claim, State: st, Due: due,
		Attempt: webhook.Attempt{At: when, Status: status, Error: why}}
}

func record(t *testing.T, s webhook.Store, o webhook.Outcome) {
	t.Helper()
	must(t, fmt.Sprintf("Record of %s to %s", o.Message, o.Endpoint), s.Record(t.Context(), o))
}

// deliveries lists every delivery of endpoint, page by page, checking the pages' bounds.
func deliveries(t *testing.T, s webhook.Store, endpoint string, limit int) []webhook.Delivery {
	t.Helper()
	var all []webhook.Delivery
	q := webhook.Query{Limit: limit}
	for range 1000 {
		p, err := s.Deliveries(t.Context(), endpoint, q)
		must(t, "Deliveries of "+endpoint, err)
		want := limit
		if want == 0 {
			want = webhook.DefaultLimit
		}
		if len(p.Deliveries) > want || p.Next != "" && len(p.Deliveries) != want {
			t.Fatalf("Deliveries with Limit %d: a page of %d (Next %q)", limit, len(p.Deliveries), p.Next)
		}
		all = append(all, p.Deliveries...)
		if p.Next == "" {
			return all
		}
		q.Cursor = p.Next
	}
	t.Fatal("Deliveries: Next never ended")
	return nil
}

// deliveryOf returns the delivery of message to endpoint from a listing, or false.
func deliveryOf(t *testing.T, s webhook.Store, endpoint, message string) (webhook.Delivery, bool) {
	t.Helper()
	for _, d := range deliveries(t, s, endpoint, webhook.MaxLimit) {
		if d.Message.ID == message {
			return d, true
		}
	}
	return webhook.Delivery{}, false
}

// wantDelivery checks the listed delivery of message to endpoint: its state, attempts,
// Due (zero for none) and last attempt.
func wantDelivery(t *testing.T, s webhook.Store, endpoint, message string, st webhook.State, attempts int, due time.Time, last webhook.Attempt) {
	t.Helper()
	d, ok := deliveryOf(t, s, endpoint, message)
	if !ok {
		t.Errorf("the delivery of %s to %s is not listed", message, endpoint)
		return
	}
	checkDelivery(t, "the listed delivery of "+message, d, st, attempts, due, last)
	if d.Claim != "" {
		t.Errorf("the listed delivery of %s has claim %q, want none in a listing", message, d.Claim)
	}
}

func checkDelivery(t *testing.T, what string, d webhook.Delivery, st webhook.State, attempts int, due time.Time, last webhook.Attempt) {
	t.Helper()
	if d.State != st || d.Attempts != attempts || !d.Due.Equal(due) || !d.Last.At.Equal(last.At) || d.Last.Status != last.Status || d.Last.Error != last.Error {
		t.Errorf("%s: state %v, %d attempts, due %v, last %+v;\nwant state %v, %d attempts, due %v, last %+v",
			what, d.State, d.Attempts, d.Due, d.Last, st, attempts, due, last)
	}
}

// wantNoDelivery checks that endpoint has no delivery of message.
func wantNoDelivery(t *testing.T, s webhook.Store, endpoint, message string) {
	t.Helper()
	if _, ok := deliveryOf(t, s, endpoint, message); ok {
		t.Errorf("%s has a delivery of %s, want none", endpoint, message)
	}
}

func wantPending(t *testing.T, s webhook.Store, want int64, after string) {
	t.Helper()
	n, err := s.Pending(t.Context())
	must(t, "Pending", err)
	if n != want {
		t.Errorf("after %s: Pending %d, want %d", after, n, want)
	}
}

// wantFresh enqueues m for endpoints at now and checks whether it was fresh.
func wantFresh(t *testing.T, s webhook.Store, m webhook.Message, now time.Time, fresh bool, endpoints ...string) {
	t.Helper()
	got, dropped, err := s.Enqueue(t.Context(), m, endpoints, now)
	must(t, "Enqueue "+m.ID, err)
	if got != fresh {
		t.Errorf("Enqueue %s: fresh %v, want %v", m.ID, got, fresh)
	}
	if !got && dropped != nil {
		t.Errorf("Enqueue %s, not fresh: dropped %q, want nothing", m.ID, dropped)
	}
}

// names returns the "endpoint/message" of each delivery, in order.
func names(ds []webhook.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Endpoint + "/" + d.Message.ID
	}
	return out
}

// messageIDs returns the message IDs of ds, in order.
func messageIDs(ds []webhook.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Message.ID
	}
	return out
}

func wantEndpoint(t *testing.T, what string, got, want webhook.Endpoint) {
	t.Helper()
	same := got.ID == want.ID && got.Account == want.Account && got.URL == want.URL &&
		slices.Equal(got.Types, want.Types) && got.Secret == want.Secret && got.PreviousSecret == want.PreviousSecret &&
		got.PreviousUntil.Equal(want.PreviousUntil) && got.Disabled.Equal(want.Disabled) &&
		got.DisabledReason == want.DisabledReason && got.DisabledBy == want.DisabledBy && got.Created.Equal(want.Created) &&
		got.LastDelivered.Equal(want.LastDelivered) &&
		got.Revision == want.Revision
	if !same {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func wantMessage(t *testing.T, what string, got, want webhook.Message) {
	t.Helper()
	if got.ID != want.ID || got.Type != want.Type || got.Account != want.Account || !got.At.Equal(want.At) ||
		!bytes.Equal(got.Body, want.Body) || !got.Keep.Equal(want.Keep) {
		t.Errorf("%s: message\n got %+v (body %q)\nwant %+v (body %q)", what, got, got.Body, want, want.Body)
	}
}

// maxPending returns the bound a store keeps on an endpoint's pending deliveries.
func maxPending(s webhook.Store) int {
	if b, ok := s.(interface{ MaxPending() int }); ok {
		return b.MaxPending()
	}
	return webhook.MaxPending
}

// fill enqueues n messages for endpoint at now, from 8 goroutines, each fresh and
// delivered to it.
func fill(t *testing.T, s webhook.Store, n ids, endpoint string, count int, now time.Time) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < count; i += 8 {
				m := whMessage(n, fmt.Sprintf("fill-%d", i), 0)
				m.Body = []byte(`{}`)
				fresh, dropped, err := s.Enqueue(t.Context(), m, []string{endpoint}, now)
				if err != nil || !fresh || len(dropped) != 0 {
					t.Errorf("Enqueue %d of %d: fresh %v, dropped %q, %v", i, count, fresh, dropped, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func whEndpointCreateRead(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	e := whEndpoint(n, n.id("a"), "one", time.Second)
	e.PreviousSecret, e.PreviousUntil = "whsec_b2xkIG9sZCBvbGQ=", at(time.Hour)
	e.Disabled, e.DisabledReason, e.DisabledBy = at(2*time.Hour), "disabled by its owner ✓", webhook.DisabledByOperator
	e.Revision = 7                  // a creation starts at 1 whatever it says
	e.LastDelivered = at(time.Hour) // and with no success
	got := createEndpoint(t, s, e)
	want := e
	want.Revision, want.LastDelivered = 1, time.Time{}
	wantEndpoint(t, "CreateEndpoint", got, want)
	read, err := s.Endpoint(ctx, e.ID)
	must(t, "Endpoint", err)
	wantEndpoint(t, "Endpoint", read, want)

	// Every type, and none; the operator's.
	bare := webhook.Endpoint{ID: n.id("ep-bare"), URL: "http://localhost:9000/", Secret: "whsec_x", Created: at(0)}
	got = createEndpoint(t, s, bare)
	bare.Revision = 1
	wantEndpoint(t, "CreateEndpoint of the operator's, for every type", got, bare)
	read, err = s.Endpoint(ctx, bare.ID)
	must(t, "Endpoint", err)
	wantEndpoint(t, "Endpoint of the operator's", read, bare)

	// The returned values share nothing with the store.
	read, err = s.Endpoint(ctx, e.ID)
	must(t, "Endpoint", err)
	read.Types[0] = "changed"
	read, err = s.Endpoint(ctx, e.ID)
	must(t, "Endpoint", err)
	wantEndpoint(t, "Endpoint after the caller changed what it got", read, want)

	taken := whEndpoint(n, n.id("b"), "one", time.Minute)
	_, err = s.CreateEndpoint(ctx, taken)
	wantErr(t, "CreateEndpoint of a taken ID", err, store.ErrConflict)
	read, err = s.Endpoint(ctx, e.ID)
	must(t, "Endpoint", err)
	wantEndpoint(t, "Endpoint after the refused creation", read, want)
	_, err = s.Endpoint(ctx, n.id("ep-ghost"))
	wantErr(t, "Endpoint of an unknown ID", err, store.ErrNotFound)
}

func whEndpointsOldestFirst(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a, b := n.id("a"), n.id("b")
	for _, e := range []webhook.Endpoint{
		whEndpoint(n, a, "c", 2*time.Second), whEndpoint(n, a, "b", time.Second), whEndpoint(n, b, "x", 0),
		whEndpoint(n, a, "a", time.Second), whEndpoint(n, "", "op", 0), whEndpoint(n, a, "d", 0),
	} {
		createEndpoint(t, s, e)
	}
	list := func(account string) []string {
		t.Helper()
		es, err := s.Endpoints(ctx, account)
		must(t, "Endpoints", err)
		ids := make([]string, len(es))
		for i, e := range es {
			ids[i] = e.ID
			if e.Account != account {
				t.Errorf("Endpoints(%q) holds %s of account %q", account, e.ID, e.Account)
			}
		}
		return ids
	}
	if got, want := list(a), []string{n.id("ep-d"), n.id("ep-a"), n.id("ep-b"), n.id("ep-c")}; !slices.Equal(got, want) {
		t.Errorf("Endpoints of an account: %q, want %q", got, want)
	}
	if got, want := list(b), []string{n.id("ep-x")}; !slices.Equal(got, want) {
		t.Errorf("Endpoints of another account: %q, want %q", got, want)
	}
	if got, want := list(""), []string{n.id("ep-op")}; !slices.Equal(got, want) {
		t.Errorf("Endpoints of the operator: %q, want %q", got, want)
	}
	if got := list(n.id("none")); len(got) != 0 {
		t.Errorf("Endpoints of an account without any: %q, want none", got)
	}
}

func whEndpointUpdate(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	e := createEndpoint(t, s, whEndpoint(n, n.id("a"), "one", time.Second))
	u := e
	u.Account, u.Created = n.id("other"), at(time.Hour) // neither changes
	u.URL, u.Types, u.Secret = "https://other.example.com/h", []string{"account.suspended"}, "whsec_bmV3"
	u.PreviousSecret, u.PreviousUntil = e.Secret, at(24*time.Hour)
	u.Disabled, u.DisabledReason = at(time.Minute), "failed for three days"
	u.LastDelivered = at(time.Hour) // kept as stored: none
	got, err := s.UpdateEndpoint(ctx, u)
	must(t, "UpdateEndpoint", err)
	want := u
	want.Account, want.Created, want.LastDelivered, want.Revision = e.Account, e.Created, time.Time{}, 2
	wantEndpoint(t, "UpdateEndpoint", got, want)
	read, err := s.Endpoint(ctx, e.ID)
	must(t, "Endpoint", err)
	wantEndpoint(t, "Endpoint after the update", read, want)
	if es, _ := s.Endpoints(ctx, n.id("other")); len(es) != 0 {
		t.Errorf("the update moved the endpoint to another account: %d endpoints there", len(es))
	}

	// Back to every type, no rotation, enabled.
	v := read
	v.Types, v.PreviousSecret, v.PreviousUntil, v.Disabled, v.DisabledReason = nil, "", time.Time{}, time.Time{}, ""
	got, err = s.UpdateEndpoint(ctx, v)
	must(t, "UpdateEndpoint clearing the fields", err)
	v.Revision = 3
	wantEndpoint(t, "UpdateEndpoint clearing the fields", got, v)

	stale := u // read at revision 1
	stale.URL = "https://stale.example.com/"
	_, err = s.UpdateEndpoint(ctx, stale)
	wantErr(t, "UpdateEndpoint at an old revision", err, store.ErrConflict)
	ahead := v
	ahead.Revision = 9
	_, err = s.UpdateEndpoint(ctx, ahead)
	wantErr(t, "UpdateEndpoint at a revision never stored", err, store.ErrConflict)
	ghost := v
	ghost.ID = n.id("ep-ghost")
	_, err = s.UpdateEndpoint(ctx, ghost)
	wantErr(t, "UpdateEndpoint of an unknown ID", err, store.ErrNotFound)
	read, err = s.Endpoint(ctx, e.ID)
	must(t, "Endpoint", err)
	wantEndpoint(t, "Endpoint after the refused updates", read, v)
}

func whEndpointDisabledBy(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	e := whEndpoint(n, n.id("acct"), "one", 0)
	e.Disabled, e.DisabledReason, e.DisabledBy = at(time.Hour), "answered 410 Gone", webhook.DisabledByDelivery
	got := createEndpoint(t, s, e)
	want := e
	want.Revision = 1
	wantEndpoint(t, "CreateEndpoint disabled by the deliverer", got, want)
	for i, step := range []struct {
		what string
		by   string
		when time.Time
	}{
		{"taken over by the operator", webhook.DisabledByOperator, at(2 * time.Hour)},
		{"enabled", "", time.Time{}},
		{"disabled by the holder", webhook.DisabledByAccount, at(3 * time.Hour)},
		{"disabled before stores kept who did", "", at(4 * time.Hour)},
	} {
		change := want
		change.Disabled, change.DisabledBy, change.DisabledReason = step.when, step.by, step.what
		if step.when.IsZero() {
			change.DisabledReason = ""
		}
		got, err := s.UpdateEndpoint(ctx, change)
		must(t, "UpdateEndpoint: "+step.what, err)
		want = change
		want.Revision = int64(i) + 2
		wantEndpoint(t, "UpdateEndpoint: "+step.what, got, want)
		read, err := s.Endpoint(ctx, e.ID)
		must(t, "Endpoint", err)
		wantEndpoint(t, "Endpoint after "+step.what, read, want)
	}
	for _, c := range []struct{ what, by string }{
		{"none of the values", "the operator"},
		{"too long", strings.Repeat("o", webhook.MaxDisabledBy+1)},
	} {
		bad := want
		bad.DisabledBy = c.by
		_, err := s.UpdateEndpoint(ctx, bad)
		wantErr(t, "UpdateEndpoint with a DisabledBy "+c.what, err, store.ErrInvalid)
	}
	bad := want
	bad.Disabled, bad.DisabledBy = time.Time{}, webhook.DisabledByOperator
	_, err := s.UpdateEndpoint(ctx, bad)
	wantErr(t, "UpdateEndpoint enabling with a DisabledBy", err, store.ErrInvalid)
	read, err := s.Endpoint(ctx, e.ID)
	must(t, "Endpoint", err)
	wantEndpoint(t, "Endpoint after the refused updates", read, want)
}

func whEndpointConcurrentUpdate(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	e := createEndpoint(t, s, whEndpoint(n, n.id("a"), "one", 0))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			u := e
			u.URL = fmt.Sprintf("https://w%02d.example.com/", i)
			_, errs[i] = s.UpdateEndpoint(ctx, u)
		})
	}
	wg.Wait()
	if w := oneWinner(t, "UpdateEndpoint", errs); w >= 0 {
		got, err := s.Endpoint(ctx, e.ID)
		must(t, "Endpoint", err)
		if want := fmt.Sprintf("https://w%02d.example.com/", w); got.URL != want || got.Revision != 2 {
			t.Errorf("after concurrent updates: URL %q at revision %d, want the winner's %q at 2", got.URL, got.Revision, want)
		}
	}
}

func whEndpointDelete(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	b := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "b", time.Second)).ID
	m1, m2, m3 := whMessage(n, "1", 0), whMessage(n, "2", 0), whMessage(n, "3", 0)
	enqueue(t, s, m1, t0, a, b)
	enqueue(t, s, m2, t0, a)
	enqueue(t, s, m3, at(time.Hour), a) // pending, not claimed
	claimed := claimDue(t, s, t0, 10)
	if len(claimed) != 3 {
		t.Fatalf("Claim: %d deliveries, want 3", len(claimed))
	}
	var held webhook.Delivery // a's delivery of m2, left claimed
	for _, d := range claimed {
		switch {
		case d.Endpoint == a && d.Message.ID == m1.ID:
			record(t, s, outcome(d, webhook.Delivered, at(time.Second), 200, "", time.Time{}))
		case d.Endpoint == a:
			held = d
		}
	}
	wantPending(t, s, 3, "the claims") // a: m2 and m3; b: m1

	must(t, "DeleteEndpoint", s.DeleteEndpoint(ctx, a))
	_, err := s.Endpoint(ctx, a)
	wantErr(t, "Endpoint after DeleteEndpoint", err, store.ErrNotFound)
	if ds := deliveries(t, s, a, 0); len(ds) != 0 {
		t.Errorf("Deliveries of the deleted endpoint: %q, want none", names(ds))
	}
	wantPending(t, s, 1, "DeleteEndpoint")
	wantErr(t, "Record of a delivery of the deleted endpoint", s.Record(ctx, outcome(held, webhook.Delivered, at(time.Second), 200, "", time.Time{})), store.ErrNotFound)
	_, err = s.Resend(ctx, a, m1.ID, at(time.Minute))
	wantErr(t, "Resend of a delivery of the deleted endpoint", err, store.ErrNotFound)
	// Past every lease: only b's delivery is due.
	if ds := claimDue(t, s, at(2*time.Hour), 10); len(ds) != 1 || ds[0].Endpoint != b {
		t.Errorf("Claim after DeleteEndpoint: %q, want only %s's", names(ds), b)
	}
	wantErr(t, "DeleteEndpoint again", s.DeleteEndpoint(ctx, a), store.ErrNotFound)
	// The messages are remembered; a new one is not delivered to a.
	wantFresh(t, s, m2, at(time.Hour), false, b)
	if dropped := enqueue(t, s, whMessage(n, "4", 0), at(time.Hour), a, b); !slices.Equal(dropped, []string{a}) {
		t.Errorf("Enqueue for the deleted endpoint: dropped %q, want %q", dropped, []string{a})
	}
	if es, err := s.Endpoints(ctx, n.id("acct")); err != nil || len(es) != 1 || es[0].ID != b {
		t.Errorf("Endpoints after DeleteEndpoint: %v, %v; want only %s", es, err, b)
	}
}

func whEndpointBound(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	acct := n.id("acct")
	label := map[string]string{acct: "acct", "": "op"}
	for _, account := range []string{acct, ""} {
		for i := range webhook.MaxEndpoints {
			createEndpoint(t, s, whEndpoint(n, account, fmt.Sprintf("%s-%d", label[account], i), time.Duration(i)*time.Second))
		}
		extra := whEndpoint(n, account, label[account]+"-extra", time.Hour)
		_, err := s.CreateEndpoint(ctx, extra)
		if wantErr(t, fmt.Sprintf("CreateEndpoint past the bound of account %q", account), err, webhook.ErrTooManyEndpoints) {
			wantErr(t, "CreateEndpoint past the bound", err, store.ErrConflict)
		}
		_, err = s.Endpoint(ctx, extra.ID)
		wantErr(t, "Endpoint of the one refused", err, store.ErrNotFound)
		if es, err := s.Endpoints(ctx, account); err != nil || len(es) != webhook.MaxEndpoints {
			t.Errorf("Endpoints(%q): %d, %v; want %d", account, len(es), err, webhook.MaxEndpoints)
		}
	}
	// Another account has room; a deletion makes room.
	createEndpoint(t, s, whEndpoint(n, n.id("other"), "other", 0))
	must(t, "DeleteEndpoint", s.DeleteEndpoint(ctx, whEndpoint(n, acct, "acct-3", 0).ID))
	createEndpoint(t, s, whEndpoint(n, acct, "after", time.Hour))
	_, err := s.CreateEndpoint(ctx, whEndpoint(n, acct, "after-2", time.Hour))
	wantErr(t, "CreateEndpoint past the bound again", err, webhook.ErrTooManyEndpoints)
}

func whEndpointBoundConcurrent(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	acct := n.id("acct")
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			_, errs[i] = s.CreateEndpoint(ctx, whEndpoint(n, acct, fmt.Sprint(i), time.Duration(i)*time.Second))
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, webhook.ErrTooManyEndpoints):
			t.Errorf("CreateEndpoint %d: %v, want nil or ErrTooManyEndpoints", i, err)
		}
	}
	es, err := s.Endpoints(ctx, acct)
	must(t, "Endpoints", err)
	if ok != webhook.MaxEndpoints || len(es) != webhook.MaxEndpoints {
		t.Errorf("%d concurrent creations: %d taken, %d listed; want %d", workers, ok, len(es), webhook.MaxEndpoints)
	}
}

func whEnqueue(t *testing.T, s webhook.Store) {
	n := newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	b := createEndpoint(t, s, whEndpoint(n, "", "b", 0)).ID
	m := whMessage(n, "1", -time.Second)
	m.Body = []byte("{\"data\":\"every byte: \x01\x7f\xc3\xa9\\u0000\"}")
	now := at(time.Minute)
	want := m
	want.Body = slices.Clone(m.Body)
	if dropped := enqueue(t, s, m, now, a, b, a); len(dropped) != 0 {
		t.Errorf("Enqueue: dropped %q, want none", dropped)
	}
	m.Body[0] = 'X' // the store keeps no reference to the body it was given
	for _, ep := range []string{a, b, a} {
		ds := deliveries(t, s, ep, 0)
		if len(ds) != 1 {
			t.Errorf("Deliveries of %s: %d, want 1 (one for an endpoint named twice)", ep, len(ds))
			continue
		}
		d := ds[0]
		if d.Endpoint != ep {
			t.Errorf("a delivery of %s names endpoint %s", ep, d.Endpoint)
		}
		wantMessage(t, "the delivery's", d.Message, want)
		checkDelivery(t, "a delivery just enqueued", d, webhook.Pending, 0, now, webhook.Attempt{})
		d.Message.Body[0] = 'X' // nor to the body it returns
	}
	wantPending(t, s, 2, "Enqueue")
	for _, d := range claimDue(t, s, now, 10) {
		wantMessage(t, "the claimed delivery's", d.Message, want)
	}
}

func whEnqueueOnce(t *testing.T, s webhook.Store) {
	n := newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	b := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "b", 0)).ID
	m := whMessage(n, "1", 0)
	enqueue(t, s, m, t0, a)
	again := m
	again.Type, again.Body, again.At = "credits.low", []byte(`{"other":true}`), at(time.Hour)
	wantFresh(t, s, again, at(time.Minute), false, a, b, n.id("ep-ghost"))
	ds := deliveries(t, s, a, 0)
	if len(ds) != 1 {
		t.Fatalf("Deliveries after the second Enqueue: %d, want 1", len(ds))
	}
	wantMessage(t, "after the second Enqueue", ds[0].Message, m)
	checkDelivery(t, "after the second Enqueue", ds[0], webhook.Pending, 0, t0, webhook.Attempt{})
	wantNoDelivery(t, s, b, m.ID)
	wantPending(t, s, 1, "the second Enqueue")

	// Remembered for no endpoint too.
	none := whMessage(n, "none", 0)
	enqueue(t, s, none, t0)
	wantFresh(t, s, none, t0, false, a)
	wantNoDelivery(t, s, a, none.ID)
}

func whEnqueueOnceUntilKeep(t *testing.T, s webhook.Store) {
	n := newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	day := 24 * time.Hour
	m := whMessage(n, "1", 0)
	m.Keep = at(day)
	enqueue(t, s, m, t0, a)
	record(t, s, outcome(claimOne(t, s, t0), webhook.Delivered, at(time.Minute), 204, "", time.Time{}))
	if got, err := s.Prune(t.Context(), at(time.Hour)); err != nil || got != 1 {
		t.Fatalf("Prune: %d, %v; want 1 delivery", got, err)
	}
	wantNoDelivery(t, s, a, m.ID)
	wantFresh(t, s, m, at(2*time.Hour), false, a) // its deliveries are gone, its Keep is not
	wantNoDelivery(t, s, a, m.ID)
	_, err := s.Prune(t.Context(), at(day))
	must(t, "Prune at Keep", err)
	wantFresh(t, s, m, at(day), false, a)
	_, err = s.Prune(t.Context(), at(day+time.Second))
	must(t, "Prune after Keep", err)
	wantFresh(t, s, m, at(day+time.Second), true, a)
	wantDelivery(t, s, a, m.ID, webhook.Pending, 0, at(day+time.Second), webhook.Attempt{})

	// The Prune that deletes a message's last delivery forgets it, past its Keep.
	short := whMessage(n, "short", 0)
	short.Keep = at(time.Hour)
	enqueue(t, s, short, t0, a)
	for _, x := range claimDue(t, s, at(2*day), webhook.MaxClaim) {
		if x.Message.ID == short.ID {
			record(t, s, outcome(x, webhook.Failed, at(time.Minute), 410, "gone", time.Time{}))
		}
	}
	if got, err := s.Prune(t.Context(), at(2*time.Hour)); err != nil || got != 1 {
		t.Fatalf("Prune: %d, %v; want 1 delivery", got, err)
	}
	wantFresh(t, s, short, at(3*time.Hour), true)

	// A message that has a delivery is remembered past its Keep.
	held := whMessage(n, "held", 0)
	held.Keep = time.Time{}
	enqueue(t, s, held, at(3*day), a)
	_, err = s.Prune(t.Context(), at(100*day))
	must(t, "Prune", err)
	wantFresh(t, s, held, at(100*day), false, a)
	wantDelivery(t, s, a, held.ID, webhook.Pending, 0, at(3*day), webhook.Attempt{})
}

func whEnqueueDropsUnknown(t *testing.T, s webhook.Store) {
	n := newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	ghost, ghost2 := n.id("ep-ghost"), n.id("ep-ghost-2")
	m := whMessage(n, "1", 0)
	if dropped := enqueue(t, s, m, t0, ghost2, a, ghost, ghost2); !slices.Equal(dropped, []string{ghost2, ghost}) {
		t.Errorf("Enqueue: dropped %q, want %q", dropped, []string{ghost2, ghost})
	}
	wantDelivery(t, s, a, m.ID, webhook.Pending, 0, t0, webhook.Attempt{})
	wantPending(t, s, 1, "Enqueue")
}

func whEnqueueBound(t *testing.T, s webhook.Store) {
	n := newIDs()
	bound := maxPending(s)
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	b := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "b", 0)).ID
	fill(t, s, n, a, bound, t0)
	now := at(time.Second)
	full := whMessage(n, "full", 0)
	if dropped := enqueue(t, s, full, now, a, b); !slices.Equal(dropped, []string{a}) {
		t.Errorf("Enqueue for an endpoint with %d pending: dropped %q, want %q", bound, dropped, []string{a})
	}
	wantDelivery(t, s, b, full.ID, webhook.Pending, 0, now, webhook.Attempt{})
	wantPending(t, s, int64(bound)+1, "the bound")

	// A claimed delivery is still pending.
	d := claimDue(t, s, now, 1)
	if len(d) != 1 || d[0].Endpoint != a {
		t.Fatalf("Claim of the earliest: %q, want one of %s's", names(d), a)
	}
	if dropped := enqueue(t, s, whMessage(n, "claimed", 0), now, a); !slices.Equal(dropped, []string{a}) {
		t.Errorf("Enqueue while one is claimed: dropped %q, want %q", dropped, []string{a})
	}
	record(t, s, outcome(d[0], webhook.Delivered, now, 200, "", time.Time{}))
	next := whMessage(n, "next", 0)
	if dropped := enqueue(t, s, next, now, a); len(dropped) != 0 {
		t.Errorf("Enqueue after one was delivered: dropped %q, want none", dropped)
	}
	if dropped := enqueue(t, s, whMessage(n, "after", 0), now, a); !slices.Equal(dropped, []string{a}) {
		t.Errorf("Enqueue at the bound again: dropped %q, want %q", dropped, []string{a})
	}
	wantPending(t, s, int64(bound)+1, "the bound again")
}

func whEnqueueBoundConcurrent(t *testing.T, s webhook.Store) {
	n := newIDs()
	bound := maxPending(s)
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	fill(t, s, n, a, bound-3, t0)
	var (
		mu      sync.Mutex
		taken   int
		wg      sync.WaitGroup
		racers  = 16
		dropped = 0
	)
	for i := range racers {
		wg.Go(func() {
			_, d, err := s.Enqueue(t.Context(), whMessage(n, fmt.Sprint("race-", i), 0), []string{a}, t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("Enqueue: %v", err)
			case len(d) == 0:
				taken++
			default:
				dropped++
			}
		})
	}
	wg.Wait()
	if taken != 3 || dropped != racers-3 {
		t.Errorf("%d enqueues at once with room for 3: %d delivered, %d dropped", racers, taken, dropped)
	}
	wantPending(t, s, int64(bound), "the race")
}

func whEnqueueBoundManyAccounts(t *testing.T, s webhook.Store) {
	const room, accounts, each = 40, 32, 3
	n := newIDs()
	bound := maxPending(s)
	needRoom(t, s, room)
	op := createEndpoint(t, s, whEndpoint(n, "", "operator", 0)).ID
	own := make([]string, accounts)
	for i := range own {
		own[i] = createEndpoint(t, s, whEndpoint(n, n.id(fmt.Sprint("acct-", i)), fmt.Sprint("own-", i), 0)).ID
	}
	fill(t, s, n, op, bound-room, t0)
	var (
		mu    sync.Mutex
		taken int
		wg    sync.WaitGroup
	)
	for i := range accounts {
		for j := range each {
			wg.Go(func() {
				m := whMessage(n, fmt.Sprintf("acct-%d-%d", i, j), 0)
				m.Account = n.id(fmt.Sprint("acct-", i))
				fresh, dropped, err := s.Enqueue(t.Context(), m, []string{own[i], op}, t0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil || !fresh:
					t.Errorf("Enqueue of account %d: fresh %v, %v", i, fresh, err)
				case len(dropped) == 0:
					taken++
				case !slices.Equal(dropped, []string{op}):
					t.Errorf("Enqueue of account %d: dropped %q, want none or the operator's %q only", i, dropped, op)
				}
			})
		}
	}
	wg.Wait()
	if taken != room {
		t.Errorf("%d enqueues of %d accounts at once with room for %d at the operator's endpoint: %d delivered to it", accounts*each, accounts, room, taken)
	}
	for i, id := range own {
		if got := len(deliveries(t, s, id, webhook.MaxLimit)); got != each {
			t.Errorf("account %d's endpoint has %d deliveries, want %d", i, got, each)
		}
	}
	wantPending(t, s, int64(bound+accounts*each), "the race of the accounts")
	// At the bound: one more is dropped; once one is delivered, the next is taken.
	if dropped := enqueue(t, s, whMessage(n, "full", 0), t0, op); !slices.Equal(dropped, []string{op}) {
		t.Errorf("Enqueue at the bound: dropped %q, want %q", dropped, []string{op})
	}
	d := claimDue(t, s, t0, webhook.MaxClaim)
	var mine webhook.Delivery
	for _, c := range d {
		if c.Endpoint == op {
			mine = c
			break
		}
	}
	if mine.Claim == "" {
		t.Fatalf("Claim: none of the operator's endpoint's %d deliveries", bound)
	}
	record(t, s, outcome(mine, webhook.Failed, t0, 500, "no", time.Time{}))
	if dropped := enqueue(t, s, whMessage(n, "room", 0), t0, op); len(dropped) != 0 {
		t.Errorf("Enqueue after one failed: dropped %q, want none", dropped)
	}
}

func whEnqueueAllOrNothing(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	m := whMessage(n, "1", 0)
	for _, c := range []struct {
		what      string
		change    func(*webhook.Message)
		endpoints []string
		now       time.Time
	}{
		{"a type with a NUL byte", func(m *webhook.Message) { m.Type = "key.\x00" }, []string{a}, t0},
		{"an account of invalid UTF-8", func(m *webhook.Message) { m.Account = "\xff" }, []string{a}, t0},
		{"a body over MaxBody", func(m *webhook.Message) { m.Body = bytes.Repeat([]byte("x"), webhook.MaxBody+1) }, []string{a}, t0},
		{"no time", func(m *webhook.Message) { m.At = time.Time{} }, []string{a}, t0},
		{"a Keep before 1970", func(m *webhook.Message) { m.Keep = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) }, []string{a}, t0},
		{"an endpoint ID with a NUL byte", func(*webhook.Message) {}, []string{a, "ep\x00"}, t0},
		{"an empty endpoint ID", func(*webhook.Message) {}, []string{a, ""}, t0},
		{"a now before 1970", func(*webhook.Message) {}, []string{a}, time.Unix(-1, 0)},
	} {
		bad := m
		bad.Body = slices.Clone(m.Body)
		c.change(&bad)
		fresh, _, err := s.Enqueue(ctx, bad, c.endpoints, c.now)
		wantErr(t, "Enqueue of "+c.what, err, store.ErrInvalid)
		if fresh {
			t.Errorf("Enqueue of %s: fresh", c.what)
		}
	}
	_, _, err := s.Enqueue(canceled(t), m, []string{a}, t0)
	wantErr(t, "Enqueue with a canceled context", err, context.Canceled)
	wantPending(t, s, 0, "the refused Enqueues")
	wantNoDelivery(t, s, a, m.ID)
	enqueue(t, s, m, t0, a)

	largest := whMessage(n, "largest", 0)
	largest.Body = make([]byte, webhook.MaxBody)
	for i := range largest.Body {
		largest.Body[i] = byte(i * 7)
	}
	enqueue(t, s, largest, t0, a)
	if d, ok := deliveryOf(t, s, a, largest.ID); !ok || !bytes.Equal(d.Message.Body, largest.Body) {
		t.Errorf("a body of MaxBody bytes, every byte value: listed %v, body kept %v", ok, bytes.Equal(d.Message.Body, largest.Body))
	}
}

func whClaimDue(t *testing.T, s webhook.Store) {
	n := newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	b := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "b", 0)).ID
	// Due at 30s, 10s, 40s and 20s, enqueued in that order.
	ms := map[time.Duration]webhook.Message{}
	for i, d := range []time.Duration{30, 10, 40, 20} {
		m := whMessage(n, fmt.Sprint(d), time.Duration(i)*time.Second)
		ms[d] = m
		ep := a
		if d == 20 {
			ep = b
		}
		enqueue(t, s, m, at(d*time.Second), ep)
	}
	seen := map[string]bool{}
	step := func(now time.Time, limit int, want ...time.Duration) {
		t.Helper()
		got := claimDue(t, s, now, limit)
		var wantIDs []string
		for _, d := range want {
			wantIDs = append(wantIDs, ms[d].ID)
		}
		if !slices.Equal(messageIDs(got), wantIDs) {
			t.Errorf("Claim at %v, limit %d: %q, want %q", now.Sub(t0), limit, messageIDs(got), wantIDs)
			return
		}
		for _, d := range got {
			if d.Claim == "" || d.Claim != got[0].Claim || seen[d.Claim] {
				t.Errorf("Claim at %v: claim %q; want one new claim for the call", now.Sub(t0), d.Claim)
			}
			checkDelivery(t, "a claimed delivery", d, webhook.Pending, 0, now.Add(whLease), webhook.Attempt{})
			for due, m := range ms {
				if m.ID == d.Message.ID {
					wantMessage(t, "a claimed delivery's", d.Message, m)
					if ep := map[bool]string{true: b, false: a}[due == 20]; d.Endpoint != ep {
						t.Errorf("the delivery of %s names endpoint %s, want %s", m.ID, d.Endpoint, ep)
					}
				}
			}
		}
		if len(got) > 0 {
			seen[got[0].Claim] = true
		}
	}
	step(at(5*time.Second), 10)
	step(at(25*time.Second), 1, 10)
	step(at(25*time.Second), 5, 20)
	step(at(30*time.Second-time.Nanosecond), 5)
	step(at(30*time.Second), 5, 30)
	step(at(50*time.Second), 5, 40)
	step(at(50*time.Second), 5)
	wantDelivery(t, s, b, ms[20].ID, webhook.Pending, 0, at(25*time.Second+whLease), webhook.Attempt{})
}

func whClaimLeased(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	m := whMessage(n, "1", 0)
	enqueue(t, s, m, t0, a)
	first := claimOne(t, s, t0)
	for _, d := range []time.Duration{0, time.Second, whLease - time.Nanosecond} {
		if ds := claimDue(t, s, at(d), 10); len(ds) != 0 {
			t.Errorf("Claim %v into the lease: %q, want none", d, names(ds))
		}
	}
	second := claimOne(t, s, at(whLease))
	if second.Claim == first.Claim {
		t.Errorf("the claim after the lease is the first's (%q), want a new one", second.Claim)
	}
	checkDelivery(t, "claimed again", second, webhook.Pending, 0, at(2*whLease), webhook.Attempt{})
	wantErr(t, "Record by the first claim", s.Record(ctx, outcome(first, webhook.Delivered, at(whLease), 200, "", time.Time{})), webhook.ErrClaimLost)
	record(t, s, outcome(second, webhook.Delivered, at(whLease+time.Second), 200, "", time.Time{}))
	wantDelivery(t, s, a, m.ID, webhook.Delivered, 1, time.Time{}, webhook.Attempt{At: at(whLease + time.Second), Status: 200})
}

func whClaimConcurrent(t *testing.T, s webhook.Store) {
	n := newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	b := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "b", 0)).ID
	const messages = 50
	needRoom(t, s, messages)
	for i := range messages {
		enqueue(t, s, whMessage(n, fmt.Sprint(i), 0), at(time.Duration(i)*time.Millisecond), a, b)
	}
	var (
		mu  sync.Mutex
		got = map[string]int{}
		wg  sync.WaitGroup
	)
	now := at(time.Minute)
	for range workers {
		wg.Go(func() {
			// A store that hands a delivery out twice would never run dry: stop at
			// twice the deliveries there are.
			for range 2 * 2 * messages {
				ds, err := s.Claim(t.Context(), now, time.Hour, 3)
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, name := range names(ds) {
					got[name]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != 2*messages {
		t.Errorf("concurrent claims took %d deliveries, want %d", len(got), 2*messages)
	}
	for name, c := range got {
		if c != 1 {
			t.Errorf("delivery %s was claimed %d times within its lease, want once", name, c)
		}
	}
	if ds := claimDue(t, s, now, 10); len(ds) != 0 {
		t.Errorf("Claim after the race: %q, want none", names(ds))
	}
}

func whClaimBounds(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	enqueue(t, s, whMessage(n, "1", 0), t0, a)
	for _, c := range []struct {
		limit int
		lease time.Duration
	}{{0, whLease}, {-1, whLease}, {webhook.MaxClaim + 1, whLease}, {1, 0}, {1, -time.Second}} {
		_, err := s.Claim(ctx, t0, c.lease, c.limit)
		wantErr(t, fmt.Sprintf("Claim of %d with a lease of %v", c.limit, c.lease), err, store.ErrInvalid)
	}
	_, err := s.Claim(ctx, time.Unix(-1, 0), whLease, 1)
	wantErr(t, "Claim at an instant before 1970", err, store.ErrInvalid)
	if ds, err := s.Claim(ctx, t0, whLease, webhook.MaxClaim); err != nil || len(ds) != 1 {
		t.Errorf("Claim of MaxClaim after the refused ones: %q, %v; want the one delivery", names(ds), err)
	}
}

func whRecordOutcome(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	m1, m2, m3 := whMessage(n, "1", 0), whMessage(n, "2", 0), whMessage(n, "3", 0)
	for _, m := range []webhook.Message{m1, m2, m3} {
		enqueue(t, s, m, t0, a)
	}
	ds := claimDue(t, s, t0, 10)
	if len(ds) != 3 {
		t.Fatalf("Claim: %d deliveries, want 3", len(ds))
	}
	by := map[string]webhook.Delivery{}
	for _, d := range ds {
		by[d.Message.ID] = d
	}
	ok := webhook.Attempt{At: at(time.Second), Status: 200}
	gone := webhook.Attempt{At: at(2 * time.Second), Status: 410, Error: "the receiver answered 410 Gone"}
	busy := webhook.Attempt{At: at(3 * time.Second), Error: "dial tcp: connection refused ✗"}
	record(t, s, outcome(by[m1.ID], webhook.Delivered, ok.At, ok.Status, ok.Error, time.Time{}))
	record(t, s, outcome(by[m2.ID], webhook.Failed, gone.At, gone.Status, gone.Error, at(time.Hour))) // Due ignored
	record(t, s, outcome(by[m3.ID], webhook.Pending, busy.At, busy.Status, busy.Error, at(time.Minute)))
	wantDelivery(t, s, a, m1.ID, webhook.Delivered, 1, time.Time{}, ok)
	wantDelivery(t, s, a, m2.ID, webhook.Failed, 1, time.Time{}, gone)
	wantDelivery(t, s, a, m3.ID, webhook.Pending, 1, at(time.Minute), busy)
	wantPending(t, s, 1, "the outcomes")
	wantErr(t, "a second Record with the claim", s.Record(ctx, outcome(by[m3.ID], webhook.Delivered, at(4*time.Second), 200, "", time.Time{})), webhook.ErrClaimLost)

	if got := claimDue(t, s, at(time.Minute-time.Nanosecond), 10); len(got) != 0 {
		t.Errorf("Claim a nanosecond before the retry is due: %q, want none", names(got))
	}
	again := claimOne(t, s, at(time.Minute))
	if again.Message.ID != m3.ID {
		t.Fatalf("Claim at the retry: %s, want %s", again.Message.ID, m3.ID)
	}
	checkDelivery(t, "the retry's claim", again, webhook.Pending, 1, at(time.Minute+whLease), busy)
	late := webhook.Attempt{At: at(time.Minute + time.Second), Status: 500, Error: "the receiver answered 500"}
	record(t, s, outcome(again, webhook.Pending, late.At, late.Status, late.Error, at(time.Hour)))
	wantDelivery(t, s, a, m3.ID, webhook.Pending, 2, at(time.Hour), late)
	last := claimOne(t, s, at(time.Hour))
	record(t, s, outcome(last, webhook.Delivered, at(time.Hour+time.Second), 202, "", time.Time{}))
	wantDelivery(t, s, a, m3.ID, webhook.Delivered, 3, time.Time{}, webhook.Attempt{At: at(time.Hour + time.Second), Status: 202})
	wantPending(t, s, 0, "every delivery done")
	if got := claimDue(t, s, at(100*time.Hour), 10); len(got) != 0 {
		t.Errorf("Claim after every delivery is done: %q, want none", names(got))
	}
}

func whRecordClaimLost(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	lost := func(what string, o webhook.Outcome) {
		t.Helper()
		err := s.Record(ctx, o)
		if wantErr(t, "Record "+what, err, webhook.ErrClaimLost) {
			wantErr(t, "Record "+what, err, store.ErrConflict)
		}
	}

	// Claimed again after the lease.
	m := whMessage(n, "again", 0)
	enqueue(t, s, m, t0, a)
	first := claimOne(t, s, t0)
	second := claimOne(t, s, at(whLease))
	lost("by a claim whose delivery was claimed again", outcome(first, webhook.Delivered, at(whLease), 200, "", time.Time{}))
	wantDelivery(t, s, a, m.ID, webhook.Pending, 0, at(2*whLease), webhook.Attempt{})
	// Recorded already.
	record(t, s, outcome(second, webhook.Pending, at(whLease+time.Second), 503, "busy", at(time.Hour)))
	lost("twice by one claim", outcome(second, webhook.Delivered, at(whLease+2*time.Second), 200, "", time.Time{}))
	wantDelivery(t, s, a, m.ID, webhook.Pending, 1, at(time.Hour), webhook.Attempt{At: at(whLease + time.Second), Status: 503, Error: "busy"})

	// Resent.
	r := whMessage(n, "resent", 0)
	enqueue(t, s, r, at(2*time.Hour), a)
	third := claimDue(t, s, at(2*time.Hour), 10) // r, and m again
	if len(third) != 2 {
		t.Fatalf("Claim: %q, want 2", names(third))
	}
	held := third[0]
	if held.Message.ID != r.ID {
		held = third[1]
	}
	_, err := s.Resend(ctx, a, r.ID, at(2*time.Hour+time.Second))
	must(t, "Resend", err)
	lost("by the claim of a resent delivery", outcome(held, webhook.Delivered, at(2*time.Hour+2*time.Second), 200, "", time.Time{}))
	wantDelivery(t, s, a, r.ID, webhook.Pending, 0, at(2*time.Hour+time.Second), webhook.Attempt{})

	// Another delivery's claim, and none.
	other := whMessage(n, "other", 0)
	enqueue(t, s, other, at(3*time.Hour), a)
	wrong := outcome(held, webhook.Delivered, at(3*time.Hour), 200, "", time.Time{})
	wrong.Message = other.ID
	lost("by another delivery's claim", wrong)
	wrong.Claim = ""
	lost("without a claim, of a delivery nobody claimed", wrong)
	wantDelivery(t, s, a, other.ID, webhook.Pending, 0, at(3*time.Hour), webhook.Attempt{})

	// Late, but nobody claimed it since: the claim still holds.
	late := whMessage(n, "late", 0)
	enqueue(t, s, late, at(100*time.Hour), a)
	ds := claimDue(t, s, at(100*time.Hour), 10)
	var l webhook.Delivery
	for _, d := range ds {
		if d.Message.ID == late.ID {
			l = d
		}
	}
	record(t, s, outcome(l, webhook.Delivered, at(100*time.Hour+10*whLease), 200, "", time.Time{}))
	wantDelivery(t, s, a, late.ID, webhook.Delivered, 1, time.Time{}, webhook.Attempt{At: at(100*time.Hour + 10*whLease), Status: 200})

	// No such delivery.
	ghost := outcome(l, webhook.Delivered, at(time.Hour), 200, "", time.Time{})
	ghost.Message = n.id("msg-ghost")
	wantErr(t, "Record of an unknown message", s.Record(ctx, ghost), store.ErrNotFound)
	ghost = outcome(l, webhook.Delivered, at(time.Hour), 200, "", time.Time{})
	ghost.Endpoint = n.id("ep-ghost")
	wantErr(t, "Record of an unknown endpoint", s.Record(ctx, ghost), store.ErrNotFound)
}

// postpone returns the outcome that gives d back without an attempt, pending, due at
// due.
func postpone(d webhook.Delivery, due time.Time) webhook.Outcome {
	return webhook.Outcome{Endpoint: d.Endpoint, Message: d.Message.ID, Claim: d.Claim, State: webhook.Pending, Due: due}
}

// giveUp returns the outcome that gives d up without an attempt.
func giveUp(d webhook.Delivery) webhook.Outcome {
	return webhook.Outcome{Endpoint: d.Endpoint, Message: d.Message.ID, Claim: d.Claim, State: webhook.Failed}
}

func whRecordWithoutAttempt(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	fresh, tried := whMessage(n, "fresh", 0), whMessage(n, "tried", 0)
	enqueue(t, s, fresh, t0, a)
	enqueue(t, s, tried, t0, a)
	by := map[string]webhook.Delivery{}
	for _, d := range claimDue(t, s, t0, 10) {
		by[d.Message.ID] = d
	}
	// tried has an attempt behind it, a success, then it is resent.
	okAt := webhook.Attempt{At: at(time.Second), Status: 200}
	record(t, s, outcome(by[tried.ID], webhook.Delivered, okAt.At, okAt.Status, "", time.Time{}))
	_, err := s.Resend(ctx, a, tried.ID, at(30*time.Second))
	must(t, "Resend", err)
	ep, err := s.Endpoint(ctx, a)
	must(t, "Endpoint", err)
	by[tried.ID] = claimOne(t, s, at(30*time.Second)) // fresh's lease runs

	// Postponed: pending again, due later, nothing counted; the claim has ended.
	record(t, s, postpone(by[fresh.ID], at(time.Hour)))
	record(t, s, postpone(by[tried.ID], at(2*time.Hour)))
	wantDelivery(t, s, a, fresh.ID, webhook.Pending, 0, at(time.Hour), webhook.Attempt{})
	wantDelivery(t, s, a, tried.ID, webhook.Pending, 1, at(2*time.Hour), okAt)
	wantPending(t, s, 2, "the postponements")
	wantErr(t, "a second Record with the claim of a postponed delivery", s.Record(ctx, postpone(by[fresh.ID], at(3*time.Hour))), webhook.ErrClaimLost)
	if got := claimDue(t, s, at(time.Hour-time.Nanosecond), 10); len(got) != 0 {
		t.Errorf("Claim a nanosecond before the postponed delivery is due: %q, want none", names(got))
	}
	again := claimOne(t, s, at(time.Hour))
	checkDelivery(t, "the postponed delivery claimed again", again, webhook.Pending, 0, at(time.Hour+whLease), webhook.Attempt{})

	// Given up unattempted: no longer pending, nothing counted.
	record(t, s, giveUp(again))
	wantDelivery(t, s, a, fresh.ID, webhook.Failed, 0, time.Time{}, webhook.Attempt{})
	wantPending(t, s, 1, "a delivery given up")
	wantErr(t, "a Record after the delivery was given up", s.Record(ctx, postpone(again, at(3*time.Hour))), webhook.ErrClaimLost)
	second := claimOne(t, s, at(2*time.Hour))
	record(t, s, giveUp(second))
	wantDelivery(t, s, a, tried.ID, webhook.Failed, 1, time.Time{}, okAt)
	wantPending(t, s, 0, "both given up")
	if got := claimDue(t, s, at(100*time.Hour), 10); len(got) != 0 {
		t.Errorf("Claim after both were given up: %q, want none", names(got))
	}
	read, err := s.Endpoint(ctx, a)
	must(t, "Endpoint", err)
	wantEndpoint(t, "the endpoint after outcomes without an attempt", read, ep)

	// Pruned by their last attempt, or their enqueueing.
	if got, err := s.Prune(ctx, t0); err != nil || got != 0 {
		t.Errorf("Prune before t0: %d, %v; want none", got, err)
	}
	if got, err := s.Prune(ctx, at(time.Nanosecond)); err != nil || got != 1 {
		t.Errorf("Prune after the enqueueing: %d, %v; want the delivery never attempted", got, err)
	}
	wantNoDelivery(t, s, a, fresh.ID)
	if got, err := s.Prune(ctx, at(time.Second+time.Nanosecond)); err != nil || got != 1 {
		t.Errorf("Prune after the last attempt: %d, %v; want the delivery given up after one", got, err)
	}
	wantNoDelivery(t, s, a, tried.ID)
}

func whLastDelivered(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0))
	b := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "b", 0))
	ms := make([]webhook.Message, 6)
	for i := range ms {
		ms[i] = whMessage(n, fmt.Sprint(i), 0)
		enqueue(t, s, ms[i], t0, a.ID)
	}
	enqueue(t, s, whMessage(n, "b", 0), t0, b.ID)
	by := map[string]webhook.Delivery{}
	for _, d := range claimDue(t, s, t0, 10) {
		by[d.Endpoint+"/"+d.Message.ID] = d
	}
	of := func(m webhook.Message) webhook.Delivery { return by[a.ID+"/"+m.ID] }
	want := func(what string, e webhook.Endpoint, last time.Time) webhook.Endpoint {
		t.Helper()
		got, err := s.Endpoint(ctx, e.ID)
		must(t, "Endpoint", err)
		e.LastDelivered = last
		wantEndpoint(t, what, got, e)
		es, err := s.Endpoints(ctx, e.Account)
		must(t, "Endpoints", err)
		for _, x := range es {
			if x.ID == e.ID {
				wantEndpoint(t, what+", listed", x, e)
			}
		}
		return got
	}
	want("a new endpoint", a, time.Time{})

	// Failures and retries are no success.
	record(t, s, outcome(of(ms[0]), webhook.Failed, at(time.Second), 500, "boom", time.Time{}))
	record(t, s, outcome(of(ms[1]), webhook.Pending, at(time.Second), 503, "busy", at(time.Hour)))
	want("after a failure and a retry", a, time.Time{})

	record(t, s, outcome(of(ms[2]), webhook.Delivered, at(time.Minute), 200, "", time.Time{}))
	want("after a success", a, at(time.Minute))
	want("another endpoint", b, time.Time{})
	record(t, s, outcome(of(ms[3]), webhook.Delivered, at(30*time.Second), 204, "", time.Time{}))
	want("after an earlier success, recorded later", a, at(time.Minute))
	record(t, s, outcome(of(ms[4]), webhook.Delivered, at(2*time.Minute+time.Nanosecond), 200, "", time.Time{}))
	read := want("after a later success", a, at(2*time.Minute+time.Nanosecond))

	// An update at the revision read is taken, and keeps the success.
	u := read
	u.URL, u.LastDelivered = "https://moved.example.com/", at(time.Hour)
	got, err := s.UpdateEndpoint(ctx, u)
	must(t, "UpdateEndpoint at the revision read before the outcomes", err)
	u.LastDelivered, u.Revision = at(2*time.Minute+time.Nanosecond), a.Revision+1
	wantEndpoint(t, "UpdateEndpoint", got, u)
	v := got
	v.LastDelivered = time.Time{}
	got, err = s.UpdateEndpoint(ctx, v)
	must(t, "UpdateEndpoint", err)
	if !got.LastDelivered.Equal(at(2*time.Minute + time.Nanosecond)) {
		t.Errorf("UpdateEndpoint given no LastDelivered: %v, want the stored one", got.LastDelivered)
	}
	// A success of a resent delivery counts too.
	_, err = s.Resend(ctx, a.ID, ms[2].ID, at(time.Hour))
	must(t, "Resend", err)
	for _, d := range claimDue(t, s, at(time.Hour), 10) { // and the leases ended
		if d.Endpoint == a.ID && d.Message.ID == ms[2].ID {
			record(t, s, outcome(d, webhook.Delivered, at(time.Hour+time.Second), 200, "", time.Time{}))
		}
	}
	e, err := s.Endpoint(ctx, a.ID)
	must(t, "Endpoint", err)
	if !e.LastDelivered.Equal(at(time.Hour+time.Second)) || e.Revision != got.Revision {
		t.Errorf("after the resent delivery's success: LastDelivered %v at revision %d, want %v at %d",
			e.LastDelivered, e.Revision, at(time.Hour+time.Second), got.Revision)
	}
	if e.LastDelivered.Location() != time.UTC {
		t.Errorf("LastDelivered in %v, want UTC", e.LastDelivered.Location())
	}
}

func whLastDeliveredConcurrent(t *testing.T, s webhook.Store) {
	n := newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	needRoom(t, s, workers)
	for i := range workers {
		enqueue(t, s, whMessage(n, fmt.Sprint(i), 0), t0, a)
	}
	ds := claimDue(t, s, t0, workers)
	if len(ds) != workers {
		t.Fatalf("Claim: %d deliveries, want %d", len(ds), workers)
	}
	// The latest success is in the middle of the order the goroutines start in.
	latest := workers / 2
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			when := at(time.Duration(i) * time.Millisecond)
			if i == latest {
				when = at(time.Hour)
			}
			if err := s.Record(t.Context(), outcome(d, webhook.Delivered, when, 200, "", time.Time{})); err != nil {
				t.Errorf("Record %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	e, err := s.Endpoint(t.Context(), a)
	must(t, "Endpoint", err)
	if !e.LastDelivered.Equal(at(time.Hour)) {
		t.Errorf("after %d successes at once: LastDelivered %v, want the latest, %v", workers, e.LastDelivered, at(time.Hour))
	}
}

func whRecordError(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	m := whMessage(n, "1", 0)
	enqueue(t, s, m, t0, a)
	d := claimOne(t, s, t0)
	for _, c := range []struct {
		what   string
		change func(*webhook.Outcome)
	}{
		{"an error with a NUL byte", func(o *webhook.Outcome) { o.Attempt.Error = "refused\x00" }},
		{"an error of invalid UTF-8", func(o *webhook.Outcome) { o.Attempt.Error = strings.Repeat("x", 600) + "\xff" }},
		{"no state", func(o *webhook.Outcome) { o.State = 0 }},
		{"a state that is none", func(o *webhook.Outcome) { o.State = 9 }},
		{"a Pending outcome without Due", func(o *webhook.Outcome) { o.State, o.Due = webhook.Pending, time.Time{} }},
		{"a status but no attempt time", func(o *webhook.Outcome) { o.Attempt.At, o.Attempt.Error = time.Time{}, "" }},
		{"an error but no attempt time", func(o *webhook.Outcome) { o.Attempt.At, o.Attempt.Status = time.Time{}, 0 }},
		{"a delivered outcome without an attempt", func(o *webhook.Outcome) { o.State, o.Attempt = webhook.Delivered, webhook.Attempt{} }},
		{"a postponement without Due", func(o *webhook.Outcome) { o.State, o.Attempt, o.Due = webhook.Pending, webhook.Attempt{}, time.Time{} }},
		{"a status of 1000", func(o *webhook.Outcome) { o.Attempt.Status = 1000 }},
		{"a claim of invalid UTF-8", func(o *webhook.Outcome) { o.Claim = "\xff" }},
		{"an endpoint ID with a NUL byte", func(o *webhook.Outcome) { o.Endpoint = "\x00" }},
		{"an empty message ID", func(o *webhook.Outcome) { o.Message = "" }},
	} {
		o := outcome(d, webhook.Failed, at(time.Second), 500, "boom", time.Time{})
		c.change(&o)
		wantErr(t, "Record of "+c.what, s.Record(ctx, o), store.ErrInvalid)
	}
	wantDelivery(t, s, a, m.ID, webhook.Pending, 0, at(whLease), webhook.Attempt{})

	// The claim still holds: a long error is cut at a character boundary.
	long := strings.Repeat("é", webhook.MaxError) // 2 bytes each
	long = "x" + long                             // MaxError falls inside a character
	record(t, s, outcome(d, webhook.Failed, at(time.Second), 0, long, time.Time{}))
	got, ok := deliveryOf(t, s, a, m.ID)
	if !ok {
		t.Fatal("the delivery is not listed")
	}
	e := got.Last.Error
	if len(e) > webhook.MaxError || len(e) < webhook.MaxError-3 || !strings.HasPrefix(long, e) || !utf8.ValidString(e) {
		t.Errorf("an error of %d bytes kept as %d bytes (%.20q...), want its first MaxError (%d) bytes at most, cut at a character boundary",
			len(long), len(e), e, webhook.MaxError)
	}
}

func whDeliveriesPages(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	b := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "b", 0)).ID
	// 45 messages, three at each instant, enqueued in a shuffled order; every third
	// also for b.
	needRoom(t, s, 45)
	var ms []webhook.Message
	for i := range 45 {
		ms = append(ms, whMessage(n, fmt.Sprintf("%02d", i), time.Duration(i/3)*time.Second))
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(ms))
	for _, i := range order {
		eps := []string{a}
		if i%3 == 0 {
			eps = append(eps, b)
		}
		enqueue(t, s, ms[i], t0, eps...)
	}
	var want []string
	for i := len(ms) - 1; i >= 0; i-- {
		want = append(want, ms[i].ID) // IDs increase with At within this subtest
	}
	for _, limit := range []int{0, 1, 7, 15, 45, webhook.MaxLimit} {
		ds := deliveries(t, s, a, limit)
		if got := messageIDs(ds); !slices.Equal(got, want) {
			t.Errorf("Deliveries by pages of %d:\n got %q\nwant %q", limit, got, want)
		}
		for _, d := range ds {
			if d.Endpoint != a || d.Claim != "" {
				t.Errorf("a listed delivery names endpoint %s and claim %q", d.Endpoint, d.Claim)
			}
		}
	}
	first, err := s.Deliveries(ctx, a, webhook.Query{})
	must(t, "Deliveries", err)
	if len(first.Deliveries) != webhook.DefaultLimit || first.Next == "" {
		t.Errorf("Deliveries with Limit 0: %d and Next %q, want %d and a cursor", len(first.Deliveries), first.Next, webhook.DefaultLimit)
	}
	if got := len(deliveries(t, s, b, 0)); got != 15 {
		t.Errorf("Deliveries of the other endpoint: %d, want 15", got)
	}
	for _, limit := range []int{-1, webhook.MaxLimit + 1} {
		_, err := s.Deliveries(ctx, a, webhook.Query{Limit: limit})
		wantErr(t, fmt.Sprintf("Deliveries with Limit %d", limit), err, store.ErrInvalid)
	}
	// A page's claims are not shown, and a claim does not change the order.
	claimDue(t, s, t0, 10)
	if got := messageIDs(deliveries(t, s, a, 10)); !slices.Equal(got, want) {
		t.Errorf("Deliveries after a claim: %q, want %q", got, want)
	}
}

func whDeliveriesBadCursor(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	for i := range 3 {
		enqueue(t, s, whMessage(n, fmt.Sprint(i), time.Duration(i)*time.Second), t0, a)
	}
	p, err := s.Deliveries(ctx, a, webhook.Query{Limit: 1})
	must(t, "Deliveries", err)
	good := p.Next
	for _, c := range []string{
		"x", ".", "1.", ".YQ", "1.YQ.", "!!.YQ", "1.!!", "1.YQ==", "-1.YQ", "01.YQ", "+1.YQ",
		"zzzzzzzzzzzzzzzzz.YQ", "1._w", "1.AA", "1." + strings.Repeat("YWFh", webhook.MaxID/3+1), " " + good, good + " ",
	} {
		_, err := s.Deliveries(ctx, a, webhook.Query{Cursor: c})
		if wantErr(t, fmt.Sprintf("Deliveries with cursor %q", c), err, webhook.ErrBadCursor) {
			wantErr(t, "Deliveries with a bad cursor", err, store.ErrInvalid)
		}
	}
	// A cursor of a position past every delivery is well formed: its page is empty.
	past := webhook.Position{At: at(-time.Hour), Message: "a"}.Cursor()
	if p, err := s.Deliveries(ctx, a, webhook.Query{Cursor: past}); err != nil || len(p.Deliveries) != 0 || p.Next != "" {
		t.Errorf("Deliveries after a position past every delivery: %d, Next %q, %v; want an empty last page", len(p.Deliveries), p.Next, err)
	}
	if p, err := s.Deliveries(ctx, n.id("ep-ghost"), webhook.Query{Cursor: good}); err != nil || len(p.Deliveries) != 0 || p.Next != "" {
		t.Errorf("Deliveries of an unknown endpoint: %d, Next %q, %v; want an empty last page", len(p.Deliveries), p.Next, err)
	}
}

func whResend(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	m1, m2, m3 := whMessage(n, "1", 0), whMessage(n, "2", 0), whMessage(n, "3", 0)
	for _, m := range []webhook.Message{m1, m2, m3} {
		enqueue(t, s, m, t0, a)
	}
	by := map[string]webhook.Delivery{}
	for _, d := range claimDue(t, s, t0, 10) {
		by[d.Message.ID] = d
	}
	ok := webhook.Attempt{At: at(time.Second), Status: 200}
	gone := webhook.Attempt{At: at(time.Second), Status: 410, Error: "gone"}
	record(t, s, outcome(by[m1.ID], webhook.Delivered, ok.At, ok.Status, ok.Error, time.Time{}))
	record(t, s, outcome(by[m2.ID], webhook.Failed, gone.At, gone.Status, gone.Error, time.Time{}))
	wantPending(t, s, 1, "the outcomes")

	now := at(time.Hour)
	d, err := s.Resend(ctx, a, m1.ID, now)
	must(t, "Resend of a delivered one", err)
	checkDelivery(t, "Resend of a delivered one", d, webhook.Pending, 1, now, ok)
	wantMessage(t, "Resend's", d.Message, m1)
	if d.Endpoint != a || d.Claim != "" {
		t.Errorf("Resend: endpoint %s, claim %q; want %s and none", d.Endpoint, d.Claim, a)
	}
	d, err = s.Resend(ctx, a, m2.ID, now)
	must(t, "Resend of a failed one", err)
	checkDelivery(t, "Resend of a failed one", d, webhook.Pending, 1, now, gone)
	d, err = s.Resend(ctx, a, m3.ID, now)
	must(t, "Resend of a claimed one", err)
	checkDelivery(t, "Resend of a claimed one", d, webhook.Pending, 0, now, webhook.Attempt{})
	wantErr(t, "Record by the claim of a resent delivery", s.Record(ctx, outcome(by[m3.ID], webhook.Delivered, now, 200, "", time.Time{})), webhook.ErrClaimLost)
	wantPending(t, s, 3, "the resends")
	wantDelivery(t, s, a, m1.ID, webhook.Pending, 1, now, ok)
	if got := claimDue(t, s, now, 10); len(got) != 3 {
		t.Errorf("Claim at the resends' now: %q, want all 3", names(got))
	}

	_, err = s.Resend(ctx, a, n.id("msg-ghost"), now)
	wantErr(t, "Resend of an unknown message", err, store.ErrNotFound)
	_, err = s.Resend(ctx, n.id("ep-ghost"), m1.ID, now)
	wantErr(t, "Resend to an unknown endpoint", err, store.ErrNotFound)
}

func whPendingCounts(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	wantPending(t, s, 0, "nothing")
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	b := createEndpoint(t, s, whEndpoint(n, "", "b", 0)).ID
	for i := range 3 {
		enqueue(t, s, whMessage(n, fmt.Sprint(i), 0), t0, a, b)
	}
	wantPending(t, s, 6, "three messages for two endpoints")
	ds := claimDue(t, s, t0, 2)
	wantPending(t, s, 6, "two claims")
	record(t, s, outcome(ds[0], webhook.Delivered, at(time.Second), 200, "", time.Time{}))
	record(t, s, outcome(ds[1], webhook.Failed, at(time.Second), 400, "bad", time.Time{}))
	wantPending(t, s, 4, "two outcomes")
	_, err := s.Resend(ctx, ds[0].Endpoint, ds[0].Message.ID, at(time.Minute))
	must(t, "Resend", err)
	wantPending(t, s, 5, "a resend")
	_, err = s.Resend(ctx, ds[0].Endpoint, ds[0].Message.ID, at(time.Minute))
	must(t, "Resend again", err)
	wantPending(t, s, 5, "a resend of a pending one")
	left := 0 // b's pending after the outcomes
	for _, d := range deliveries(t, s, b, 0) {
		if d.State == webhook.Pending {
			left++
		}
	}
	must(t, "DeleteEndpoint", s.DeleteEndpoint(ctx, a))
	wantPending(t, s, int64(left), "the deletion of an endpoint")
}

func whPrune(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	a := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0)).ID
	b := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "b", 0)).ID
	var ms []webhook.Message
	for i := range 5 {
		m := whMessage(n, fmt.Sprint(i), 0)
		ms = append(ms, m)
		enqueue(t, s, m, t0, a)
	}
	enqueue(t, s, whMessage(n, "b", 0), t0, b)
	by := map[string]webhook.Delivery{}
	for _, d := range claimDue(t, s, t0, 10) {
		by[d.Message.ID] = d
	}
	record(t, s, outcome(by[ms[0].ID], webhook.Delivered, at(time.Minute), 200, "", time.Time{}))
	record(t, s, outcome(by[ms[1].ID], webhook.Failed, at(2*time.Minute), 410, "gone", time.Time{}))
	record(t, s, outcome(by[ms[2].ID], webhook.Pending, at(time.Minute), 503, "busy", at(time.Hour)))
	// ms[3] stays claimed, ms[4] is resent: both pending, enqueued long before.
	_, err := s.Resend(ctx, a, ms[4].ID, at(time.Second))
	must(t, "Resend", err)
	prune := func(before time.Time, want int64) {
		t.Helper()
		got, err := s.Prune(ctx, before)
		must(t, "Prune", err)
		if got != want {
			t.Errorf("Prune before %v: %d deliveries, want %d", before.Sub(t0), got, want)
		}
	}
	prune(at(time.Minute), 0)
	prune(at(time.Minute+time.Second), 1)
	wantNoDelivery(t, s, a, ms[0].ID)
	wantDelivery(t, s, a, ms[1].ID, webhook.Failed, 1, time.Time{}, webhook.Attempt{At: at(2 * time.Minute), Status: 410, Error: "gone"})
	prune(at(365*24*time.Hour), 1)
	wantNoDelivery(t, s, a, ms[1].ID)
	for _, m := range ms[2:] {
		if _, ok := deliveryOf(t, s, a, m.ID); !ok {
			t.Errorf("the pending delivery of %s was pruned", m.ID)
		}
	}
	if ds := deliveries(t, s, b, 0); len(ds) != 1 {
		t.Errorf("the pending delivery of b: %d listed, want 1", len(ds))
	}
	wantPending(t, s, 4, "the prunes")
	prune(at(365*24*time.Hour), 0)
}

func whInvalidValues(t *testing.T, s webhook.Store) {
	ctx, n := t.Context(), newIDs()
	acct := n.id("acct")
	for _, c := range []struct {
		what   string
		change func(*webhook.Endpoint)
	}{
		{"an empty ID", func(e *webhook.Endpoint) { e.ID = "" }},
		{"an ID over MaxID bytes", func(e *webhook.Endpoint) { e.ID = strings.Repeat("e", webhook.MaxID+1) }},
		{"an ID with a NUL byte", func(e *webhook.Endpoint) { e.ID += "\x00" }},
		{"an account of invalid UTF-8", func(e *webhook.Endpoint) { e.Account = acct + "\xff" }},
		{"a URL with a NUL byte", func(e *webhook.Endpoint) { e.URL += "\x00" }},
		{"a type of invalid UTF-8", func(e *webhook.Endpoint) { e.Types = []string{"key.rotated", "\xfe"} }},
		{"too many types", func(e *webhook.Endpoint) {
			e.Types = nil
			for i := range webhook.MaxTypes + 1 {
				e.Types = append(e.Types, fmt.Sprintf("t%03d", i))
			}
		}},
		{"a secret with a NUL byte", func(e *webhook.Endpoint) { e.Secret = "whsec_\x00" }},
		{"a previous secret of invalid UTF-8", func(e *webhook.Endpoint) { e.PreviousSecret = "\xff" }},
		{"a reason with a NUL byte", func(e *webhook.Endpoint) { e.DisabledReason = "\x00" }},
		{"no creation time", func(e *webhook.Endpoint) { e.Created = time.Time{} }},
		{"a creation before 1970", func(e *webhook.Endpoint) { e.Created = time.Unix(-1, 0) }},
		{"a Disabled after 2262", func(e *webhook.Endpoint) { e.Disabled = time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"a DisabledBy that is none of the values", func(e *webhook.Endpoint) { e.Disabled, e.DisabledBy = at(0), "owner" }},
		{"a DisabledBy of invalid UTF-8", func(e *webhook.Endpoint) { e.Disabled, e.DisabledBy = at(0), "\xff" }},
		{"a DisabledBy while enabled", func(e *webhook.Endpoint) { e.DisabledBy = webhook.DisabledByOperator }},
	} {
		e := whEndpoint(n, acct, "bad", 0)
		c.change(&e)
		_, err := s.CreateEndpoint(ctx, e)
		wantErr(t, "CreateEndpoint with "+c.what, err, store.ErrInvalid)
	}
	if es, err := s.Endpoints(ctx, acct); err != nil || len(es) != 0 {
		t.Errorf("Endpoints after the refused creations: %d, %v; want none", len(es), err)
	}
	good := createEndpoint(t, s, whEndpoint(n, acct, "good", 0))
	bad := good
	bad.URL = "https://x.example.com/\xff"
	_, err := s.UpdateEndpoint(ctx, bad)
	wantErr(t, "UpdateEndpoint with a URL of invalid UTF-8", err, store.ErrInvalid)
	read, err := s.Endpoint(ctx, good.ID)
	must(t, "Endpoint", err)
	wantEndpoint(t, "Endpoint after the refused update", read, good)

	m := whMessage(n, "1", 0)
	enqueue(t, s, m, t0, good.ID)
	for _, id := range []string{"", "ep\x00", "\xff", strings.Repeat("e", webhook.MaxID+1)} {
		what := fmt.Sprintf(" of ID %q", id)
		_, err := s.Endpoint(ctx, id)
		wantErr(t, "Endpoint"+what, err, store.ErrInvalid)
		wantErr(t, "DeleteEndpoint"+what, s.DeleteEndpoint(ctx, id), store.ErrInvalid)
		_, err = s.Deliveries(ctx, id, webhook.Query{})
		wantErr(t, "Deliveries"+what, err, store.ErrInvalid)
		_, err = s.Resend(ctx, id, m.ID, t0)
		wantErr(t, "Resend to an endpoint"+what, err, store.ErrInvalid)
		_, err = s.Resend(ctx, good.ID, id, t0)
		wantErr(t, "Resend of a message"+what, err, store.ErrInvalid)
	}
	for _, acct := range []string{"a\x00", "\xff", strings.Repeat("a", webhook.MaxID+1)} {
		_, err := s.Endpoints(ctx, acct)
		wantErr(t, fmt.Sprintf("Endpoints of account %q", acct), err, store.ErrInvalid)
	}
	_, err = s.Resend(ctx, good.ID, m.ID, time.Unix(-1, 0))
	wantErr(t, "Resend at an instant before 1970", err, store.ErrInvalid)
	_, err = s.Prune(ctx, time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC))
	wantErr(t, "Prune before an instant after 2262", err, store.ErrInvalid)
	wantDelivery(t, s, good.ID, m.ID, webhook.Pending, 0, t0, webhook.Attempt{})
}

func whCanceled(t *testing.T, s webhook.Store) {
	ctx, n := canceled(t), newIDs()
	e := createEndpoint(t, s, whEndpoint(n, n.id("acct"), "a", 0))
	m := whMessage(n, "1", 0)
	enqueue(t, s, m, t0, e.ID)
	d := claimOne(t, s, t0)
	sw, _, err := s.ClaimSweep(t.Context(), "key.expired", t0, time.Minute)
	must(t, "ClaimSweep", err)

	_, err = s.CreateEndpoint(ctx, whEndpoint(n, n.id("acct"), "b", 0))
	wantErr(t, "CreateEndpoint", err, context.Canceled)
	_, err = s.Endpoint(ctx, e.ID)
	wantErr(t, "Endpoint", err, context.Canceled)
	_, err = s.Endpoints(ctx, e.Account)
	wantErr(t, "Endpoints", err, context.Canceled)
	u := e
	u.URL = "https://changed.example.com/"
	_, err = s.UpdateEndpoint(ctx, u)
	wantErr(t, "UpdateEndpoint", err, context.Canceled)
	wantErr(t, "DeleteEndpoint", s.DeleteEndpoint(ctx, e.ID), context.Canceled)
	_, _, err = s.Enqueue(ctx, whMessage(n, "2", 0), []string{e.ID}, t0)
	wantErr(t, "Enqueue", err, context.Canceled)
	_, err = s.Claim(ctx, at(time.Hour), whLease, 10)
	wantErr(t, "Claim", err, context.Canceled)
	wantErr(t, "Record", s.Record(ctx, outcome(d, webhook.Delivered, at(time.Second), 200, "", time.Time{})), context.Canceled)
	_, err = s.Deliveries(ctx, e.ID, webhook.Query{})
	wantErr(t, "Deliveries", err, context.Canceled)
	_, err = s.Resend(ctx, e.ID, m.ID, at(time.Second))
	wantErr(t, "Resend", err, context.Canceled)
	_, err = s.Pending(ctx)
	wantErr(t, "Pending", err, context.Canceled)
	_, err = s.Prune(ctx, at(1000*time.Hour))
	wantErr(t, "Prune", err, context.Canceled)
	_, _, err = s.ClaimSweep(ctx, "period.renewed", t0, time.Minute)
	wantErr(t, "ClaimSweep", err, context.Canceled)
	wantErr(t, "RecordSweep", s.RecordSweep(ctx, "key.expired", sw.Claim, "p"), context.Canceled)

	read, err := s.Endpoint(t.Context(), e.ID)
	must(t, "Endpoint", err)
	wantEndpoint(t, "the endpoint after the canceled calls", read, e)
	if es, _ := s.Endpoints(t.Context(), e.Account); len(es) != 1 {
		t.Errorf("Endpoints after the canceled calls: %d, want 1", len(es))
	}
	wantFresh(t, s, whMessage(n, "2", 0), t0, true, e.ID)
	// The claim still holds: nothing was recorded, nothing claimed again.
	record(t, s, outcome(d, webhook.Delivered, at(time.Second), 200, "", time.Time{}))
	wantDelivery(t, s, e.ID, m.ID, webhook.Delivered, 1, time.Time{}, webhook.Attempt{At: at(time.Second), Status: 200})
	must(t, "RecordSweep", s.RecordSweep(t.Context(), "key.expired", sw.Claim, "p"))
	if _, ok, err := s.ClaimSweep(t.Context(), "period.renewed", t0, time.Minute); err != nil || !ok {
		t.Errorf("ClaimSweep of the sweep a canceled call did not claim = %v, %v; want claimed", ok, err)
	}
}

func whSweepClaim(t *testing.T, s webhook.Store) {
	ctx := t.Context()
	lease := time.Minute
	c1, ok, err := s.ClaimSweep(ctx, "key.expired", t0, lease)
	must(t, "ClaimSweep", err)
	if !ok || c1.Claim == "" || c1.Position != "" {
		t.Fatalf("ClaimSweep of a new sweep = %+v, %v; want a claim and the position \"\"", c1, ok)
	}
	if _, ok, err := s.ClaimSweep(ctx, "key.expired", at(lease-time.Nanosecond), lease); err != nil || ok {
		t.Errorf("ClaimSweep within the lease = %v, %v; want refused without an error", ok, err)
	}
	// Another sweep is apart.
	other, ok, err := s.ClaimSweep(ctx, "period.renewed", t0, lease)
	must(t, "ClaimSweep", err)
	if !ok {
		t.Fatal("ClaimSweep of another sweep was refused")
	}
	must(t, "RecordSweep", s.RecordSweep(ctx, "key.expired", c1.Claim, "p1"))
	if err := s.RecordSweep(ctx, "key.expired", c1.Claim, "p1 again"); !errors.Is(err, webhook.ErrClaimLost) || !errors.Is(err, store.ErrConflict) {
		t.Errorf("RecordSweep after the claim was recorded: %v, want ErrClaimLost", err)
	}
	// Recorded, the sweep may be claimed at once, and the claim returns the position.
	c2, ok, err := s.ClaimSweep(ctx, "key.expired", at(time.Second), lease)
	must(t, "ClaimSweep", err)
	if !ok || c2.Position != "p1" || c2.Claim == c1.Claim {
		t.Fatalf("ClaimSweep after a record = %+v, %v; want a new claim at the position \"p1\"", c2, ok)
	}
	// Its lease ended, another claim takes the sweep; the first may no longer record.
	c3, ok, err := s.ClaimSweep(ctx, "key.expired", at(time.Second+lease), lease)
	must(t, "ClaimSweep", err)
	if !ok || c3.Position != "p1" {
		t.Fatalf("ClaimSweep at the end of the lease = %+v, %v; want a claim at \"p1\"", c3, ok)
	}
	if err := s.RecordSweep(ctx, "key.expired", c2.Claim, "p2"); !errors.Is(err, webhook.ErrClaimLost) {
		t.Errorf("RecordSweep of a claim taken over: %v, want ErrClaimLost", err)
	}
	// A claim whose lease ended, which nobody claimed since, still records.
	must(t, "RecordSweep past the lease", s.RecordSweep(ctx, "key.expired", c3.Claim, "p3 \u00e9t\u00e9"))
	c4, ok, err := s.ClaimSweep(ctx, "key.expired", at(10*lease), lease)
	must(t, "ClaimSweep", err)
	if !ok || c4.Position != "p3 \u00e9t\u00e9" {
		t.Errorf("ClaimSweep = %+v, %v; want the position recorded", c4, ok)
	}
	// The other sweep kept its own claim and position.
	if _, ok, err := s.ClaimSweep(ctx, "period.renewed", at(time.Second), lease); err != nil || ok {
		t.Errorf("ClaimSweep of the other sweep within its lease = %v, %v; want refused", ok, err)
	}
	must(t, "RecordSweep", s.RecordSweep(ctx, "period.renewed", other.Claim, ""))
	if err := s.RecordSweep(ctx, "unknown", c4.Claim, "x"); !errors.Is(err, webhook.ErrClaimLost) {
		t.Errorf("RecordSweep of a sweep never claimed: %v, want ErrClaimLost", err)
	}
}

func whSweepClaimConcurrent(t *testing.T, s webhook.Store) {
	var wg sync.WaitGroup
	var claimed atomic.Int32
	for range workers {
		wg.Go(func() {
			_, ok, err := s.ClaimSweep(t.Context(), "key.expired", t0, time.Minute)
			if err != nil {
				t.Errorf("ClaimSweep: %v", err)
			}
			if ok {
				claimed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := claimed.Load(); n != 1 {
		t.Errorf("%d of %d concurrent ClaimSweep claimed the sweep, want 1", n, workers)
	}
}

func whSweepInvalid(t *testing.T, s webhook.Store) {
	ctx := t.Context()
	for _, c := range []struct {
		name  string
		lease time.Duration
	}{{"", time.Minute}, {strings.Repeat("x", webhook.MaxID+1), time.Minute}, {"a\x00b", time.Minute}, {"x", 0}, {"x", -time.Second}} {
		_, _, err := s.ClaimSweep(ctx, c.name, t0, c.lease)
		wantErr(t, fmt.Sprintf("ClaimSweep(%q, %v)", c.name, c.lease), err, store.ErrInvalid)
	}
	c, ok, err := s.ClaimSweep(ctx, "x", t0, time.Minute)
	must(t, "ClaimSweep", err)
	if !ok {
		t.Fatal("ClaimSweep refused")
	}
	for _, p := range []string{strings.Repeat("p", webhook.MaxPosition+1), "\xff", "a\x00"} {
		wantErr(t, "RecordSweep of a bad position", s.RecordSweep(ctx, "x", c.Claim, p), store.ErrInvalid)
	}
	// Nothing was stored: the claim still holds the sweep, at its first position.
	must(t, "RecordSweep", s.RecordSweep(ctx, "x", c.Claim, strings.Repeat("p", webhook.MaxPosition)))
	c2, ok, err := s.ClaimSweep(ctx, "x", t0, time.Minute)
	must(t, "ClaimSweep", err)
	if !ok || len(c2.Position) != webhook.MaxPosition {
		t.Errorf("ClaimSweep = %v and a position of %d bytes, want the longest position", ok, len(c2.Position))
	}
}
