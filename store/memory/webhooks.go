package memory

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/webhook"
)

// WebhookStore is the in-memory [webhook.Store]: the endpoints and the outbox of one
// process, which end with it. One mutex guards everything: events are rare next to API
// calls. Claim and Prune scan the pending deliveries and every delivery; a listing
// scans the endpoint's. Its zero value is ready to use.
type WebhookStore struct {
	mu        sync.Mutex
	endpoints map[string]*whEndpoint
	messages  map[string]*whMessage
	pending   map[whKey]*whDelivery // the pending deliveries of every endpoint
	sweeps    map[string]*whSweep
}

// A whSweep is a sweep: its position, and the claim that holds it until held.
type whSweep struct {
	position, claim string
	held            time.Time
}

// A whEndpoint is an endpoint with its deliveries, by message ID, and the number of
// them pending.
type whEndpoint struct {
	webhook.Endpoint
	deliveries map[string]*whDelivery
	pending    int
}

// A whMessage is a message with the number of its deliveries: one with none is
// forgotten by the first Prune after its Keep.
type whMessage struct {
	webhook.Message
	deliveries int
}

// A whDelivery is a delivery as stored: its message by reference, its claim, and when
// it was enqueued.
type whDelivery struct {
	endpoint string
	message  *whMessage
	state    webhook.State
	attempts int
	due      time.Time
	last     webhook.Attempt
	claim    string
	enqueued time.Time
}

// whKey names a delivery: its endpoint and message.
type whKey struct{ endpoint, message string }

// Interface guard.
var _ webhook.Store = (*WebhookStore)(nil)

// NewWebhookStore returns an empty WebhookStore.
func NewWebhookStore() *WebhookStore { return &WebhookStore{} }

// lock locks the store, making its maps first if it is the zero value.
func (s *WebhookStore) lock() {
	s.mu.Lock()
	if s.endpoints == nil {
		s.endpoints = make(map[string]*whEndpoint)
		s.messages = make(map[string]*whMessage)
		s.pending = make(map[whKey]*whDelivery)
		s.sweeps = make(map[string]*whSweep)
	}
}

// CreateEndpoint stores a new endpoint (see [webhook.Store]).
func (s *WebhookStore) CreateEndpoint(ctx context.Context, e webhook.Endpoint) (webhook.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return webhook.Endpoint{}, err
	}
	if err := webhook.CheckEndpoint(e); err != nil {
		return webhook.Endpoint{}, err
	}
	s.lock()
	defer s.mu.Unlock()
	if _, ok := s.endpoints[e.ID]; ok {
		return webhook.Endpoint{}, fmt.Errorf("memory: webhook endpoint %q: %w", e.ID, store.ErrConflict)
	}
	n := 0
	for _, o := range s.endpoints {
		if o.Account == e.Account {
			n++
		}
	}
	if n >= webhook.MaxEndpoints {
		return webhook.Endpoint{}, fmt.Errorf("memory: webhook endpoint %q of account %q: %w", e.ID, e.Account, webhook.ErrTooManyEndpoints)
	}
	e = cloneEndpoint(e)
	e.Revision, e.LastDelivered = 1, time.Time{}
	s.endpoints[e.ID] = &whEndpoint{Endpoint: e, deliveries: make(map[string]*whDelivery)}
	return cloneEndpoint(e), nil
}

// Endpoint returns the endpoint with the ID.
func (s *WebhookStore) Endpoint(ctx context.Context, id string) (webhook.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return webhook.Endpoint{}, err
	}
	if err := webhook.CheckID("endpoint id", id); err != nil {
		return webhook.Endpoint{}, err
	}
	s.lock()
	defer s.mu.Unlock()
	ep, ok := s.endpoints[id]
	if !ok {
		return webhook.Endpoint{}, fmt.Errorf("memory: webhook endpoint %q: %w", id, store.ErrNotFound)
	}
	return cloneEndpoint(ep.Endpoint), nil
}

// Endpoints returns the endpoints of account, oldest first.
func (s *WebhookStore) Endpoints(ctx context.Context, account string) ([]webhook.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := webhook.CheckAccount(account); err != nil {
		return nil, err
	}
	s.lock()
	var out []webhook.Endpoint
	for _, ep := range s.endpoints {
		if ep.Account == account {
			out = append(out, cloneEndpoint(ep.Endpoint))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b webhook.Endpoint) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// UpdateEndpoint replaces the endpoint at the revision it was read at.
func (s *WebhookStore) UpdateEndpoint(ctx context.Context, e webhook.Endpoint) (webhook.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return webhook.Endpoint{}, err
	}
	s.lock()
	defer s.mu.Unlock()
	ep, ok := s.endpoints[e.ID]
	if ok {
		// Account, Created and LastDelivered are the stored ones: check what will be
		// stored.
		e.Account, e.Created, e.LastDelivered = ep.Account, ep.Created, ep.LastDelivered
	}
	if err := webhook.CheckEndpoint(e); err != nil {
		return webhook.Endpoint{}, err
	}
	switch {
	case !ok:
		return webhook.Endpoint{}, fmt.Errorf("memory: webhook endpoint %q: %w", e.ID, store.ErrNotFound)
	case ep.Revision != e.Revision:
		return webhook.Endpoint{}, fmt.Errorf("memory: webhook endpoint %q changed since it was read (revision %d, now %d): %w",
			e.ID, e.Revision, ep.Revision, store.ErrConflict)
	}
	e = cloneEndpoint(e)
	e.Revision++
	ep.Endpoint = e
	return cloneEndpoint(e), nil
}

// DeleteEndpoint deletes the endpoint and its deliveries.
func (s *WebhookStore) DeleteEndpoint(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := webhook.CheckID("endpoint id", id); err != nil {
		return err
	}
	s.lock()
	defer s.mu.Unlock()
	ep, ok := s.endpoints[id]
	if !ok {
		return fmt.Errorf("memory: webhook endpoint %q: %w", id, store.ErrNotFound)
	}
	for _, d := range ep.deliveries {
		s.deleteDelivery(ep, d)
	}
	delete(s.endpoints, id)
	return nil
}

// deleteDelivery deletes d, a delivery of ep.
func (s *WebhookStore) deleteDelivery(ep *whEndpoint, d *whDelivery) {
	if d.state == webhook.Pending {
		delete(s.pending, whKey{d.endpoint, d.message.ID})
		ep.pending--
	}
	delete(ep.deliveries, d.message.ID)
	d.message.deliveries--
}

// Enqueue stores m with a pending delivery for each endpoint that has room, all at
// once, unless its ID is remembered.
func (s *WebhookStore) Enqueue(ctx context.Context, m webhook.Message, endpoints []string, now time.Time) (bool, []string, error) {
	if err := ctx.Err(); err != nil {
		return false, nil, err
	}
	if err := webhook.CheckEnqueue(m, endpoints, now); err != nil {
		return false, nil, err
	}
	s.lock()
	defer s.mu.Unlock()
	if _, ok := s.messages[m.ID]; ok {
		return false, nil, nil
	}
	m.Body = slices.Clone(m.Body)
	msg := &whMessage{Message: m}
	s.messages[m.ID] = msg
	var dropped []string
	for i, id := range endpoints {
		if slices.Contains(endpoints[:i], id) {
			continue
		}
		ep, ok := s.endpoints[id]
		if !ok || ep.pending >= webhook.MaxPending {
			dropped = append(dropped, id)
			continue
		}
		d := &whDelivery{endpoint: id, message: msg, state: webhook.Pending, due: now, enqueued: now}
		ep.deliveries[m.ID] = d
		ep.pending++
		msg.deliveries++
		s.pending[whKey{id, m.ID}] = d
	}
	return true, dropped, nil
}

// Claim leases up to limit due deliveries, the earliest due first, to a new claim.
func (s *WebhookStore) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]webhook.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := webhook.CheckClaim(now, lease, limit); err != nil {
		return nil, err
	}
	claim := rand.Text()
	s.lock()
	defer s.mu.Unlock()
	var due []*whDelivery
	for _, d := range s.pending {
		if !d.due.After(now) {
			due = append(due, d)
		}
	}
	slices.SortFunc(due, func(a, b *whDelivery) int {
		return cmp.Or(a.due.Compare(b.due), cmp.Compare(a.endpoint, b.endpoint), cmp.Compare(a.message.ID, b.message.ID))
	})
	if len(due) > limit {
		due = due[:limit]
	}
	out := make([]webhook.Delivery, len(due))
	for i, d := range due {
		d.claim, d.due = claim, now.Add(lease)
		out[i] = d.delivery()
		out[i].Claim = claim
	}
	return out, nil
}

// Record stores the outcome of a delivery its claim holds, and a success in its
// endpoint's LastDelivered.
func (s *WebhookStore) Record(ctx context.Context, o webhook.Outcome) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o, err := webhook.CheckOutcome(o)
	if err != nil {
		return err
	}
	s.lock()
	defer s.mu.Unlock()
	ep, d, err := s.delivery(o.Endpoint, o.Message)
	if err != nil {
		return err
	}
	if d.claim == "" || d.claim != o.Claim {
		return fmt.Errorf("memory: webhook delivery of message %q to endpoint %q: %w", o.Message, o.Endpoint, webhook.ErrClaimLost)
	}
	if o.Attempted() {
		d.attempts++
		d.last = o.Attempt
		d.last.At = d.last.At.UTC()
		if o.State == webhook.Delivered && d.last.At.After(ep.LastDelivered) {
			ep.LastDelivered = d.last.At
		}
	}
	d.claim, d.due = "", o.Due
	if o.State != webhook.Pending {
		delete(s.pending, whKey{o.Endpoint, o.Message})
		ep.pending--
	}
	d.state = o.State
	return nil
}

// delivery returns the delivery of message to endpoint, and its endpoint, or an
// error wrapping store.ErrNotFound. The caller holds the lock.
func (s *WebhookStore) delivery(endpoint, message string) (*whEndpoint, *whDelivery, error) {
	if ep, ok := s.endpoints[endpoint]; ok {
		if d, ok := ep.deliveries[message]; ok {
			return ep, d, nil
		}
	}
	return nil, nil, fmt.Errorf("memory: webhook delivery of message %q to endpoint %q: %w", message, endpoint, store.ErrNotFound)
}

// Deliveries returns a page of the endpoint's deliveries, newest message first.
func (s *WebhookStore) Deliveries(ctx context.Context, endpoint string, q webhook.Query) (webhook.Page, error) {
	if err := ctx.Err(); err != nil {
		return webhook.Page{}, err
	}
	if err := webhook.CheckID("endpoint id", endpoint); err != nil {
		return webhook.Page{}, err
	}
	limit, pos, after, err := webhook.ParseQuery(q)
	if err != nil {
		return webhook.Page{}, err
	}
	s.lock()
	var found []webhook.Delivery
	if ep, ok := s.endpoints[endpoint]; ok {
		for _, d := range ep.deliveries {
			if !after || pos.Before(d.message.At, d.message.ID) {
				found = append(found, d.delivery())
			}
		}
	}
	s.mu.Unlock()
	slices.SortFunc(found, func(a, b webhook.Delivery) int {
		return cmp.Or(b.Message.At.Compare(a.Message.At), cmp.Compare(b.Message.ID, a.Message.ID))
	})
	return webhook.PageOf(found, limit), nil
}

// Resend makes a delivery pending again, due at now, ending any claim of it.
func (s *WebhookStore) Resend(ctx context.Context, endpoint, message string, now time.Time) (webhook.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return webhook.Delivery{}, err
	}
	if err := webhook.CheckResend(endpoint, message, now); err != nil {
		return webhook.Delivery{}, err
	}
	s.lock()
	defer s.mu.Unlock()
	ep, d, err := s.delivery(endpoint, message)
	if err != nil {
		return webhook.Delivery{}, err
	}
	if d.state != webhook.Pending {
		ep.pending++
		s.pending[whKey{endpoint, message}] = d
	}
	d.state, d.due, d.claim = webhook.Pending, now, ""
	return d.delivery(), nil
}

// Pending returns the number of pending deliveries.
func (s *WebhookStore) Pending(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.lock()
	defer s.mu.Unlock()
	return int64(len(s.pending)), nil
}

// Prune deletes the finished deliveries whose last attempt was before before, and the
// messages left with no delivery whose Keep is before it.
func (s *WebhookStore) Prune(ctx context.Context, before time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := webhook.CheckTime("prune's instant", before); err != nil {
		return 0, err
	}
	s.lock()
	defer s.mu.Unlock()
	var n int64
	for _, ep := range s.endpoints {
		for _, d := range ep.deliveries {
			last := d.enqueued
			if d.attempts > 0 {
				last = d.last.At
			}
			if d.state != webhook.Pending && last.Before(before) {
				s.deleteDelivery(ep, d)
				n++
			}
		}
	}
	for id, m := range s.messages {
		if m.deliveries == 0 && m.Keep.Before(before) {
			delete(s.messages, id)
		}
	}
	return n, nil
}

// delivery returns d as a webhook.Delivery, without its claim, sharing nothing with the
// store.
func (d *whDelivery) delivery() webhook.Delivery {
	m := d.message.Message
	m.Body = slices.Clone(m.Body)
	m.At, m.Keep = m.At.UTC(), m.Keep.UTC()
	out := webhook.Delivery{Endpoint: d.endpoint, Message: m, State: d.state, Attempts: d.attempts, Last: d.last}
	if d.state == webhook.Pending {
		out.Due = d.due.UTC()
	}
	return out
}

// cloneEndpoint returns e sharing nothing with the store, its times in UTC and no
// types as nil.
func cloneEndpoint(e webhook.Endpoint) webhook.Endpoint {
	e.Types = slices.Clip(slices.Clone(e.Types))
	if len(e.Types) == 0 {
		e.Types = nil
	}
	e.Created, e.PreviousUntil, e.Disabled, e.LastDelivered = utc(e.Created), utc(e.PreviousUntil), utc(e.Disabled), utc(e.LastDelivered)
	return e
}

// utc returns t in UTC, and the zero time as it is.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// ClaimSweep claims a sweep unless a claim within its lease holds it (see
// [webhook.Store]).
func (s *WebhookStore) ClaimSweep(ctx context.Context, name string, now time.Time, lease time.Duration) (webhook.SweepClaim, bool, error) {
	if err := ctx.Err(); err != nil {
		return webhook.SweepClaim{}, false, err
	}
	if err := webhook.CheckSweepClaim(name, now, lease); err != nil {
		return webhook.SweepClaim{}, false, err
	}
	s.lock()
	defer s.mu.Unlock()
	sw := s.sweeps[name]
	if sw == nil {
		sw = &whSweep{}
		s.sweeps[name] = sw
	}
	if sw.claim != "" && now.Before(sw.held) {
		return webhook.SweepClaim{}, false, nil
	}
	sw.claim, sw.held = rand.Text(), now.Add(lease)
	return webhook.SweepClaim{Claim: sw.claim, Position: sw.position}, true, nil
}

// RecordSweep stores a sweep's position and ends its claim, if the claim holds it.
func (s *WebhookStore) RecordSweep(ctx context.Context, name, claim, position string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := webhook.CheckSweepRecord(name, claim, position); err != nil {
		return err
	}
	s.lock()
	defer s.mu.Unlock()
	sw := s.sweeps[name]
	if sw == nil || sw.claim == "" || sw.claim != claim {
		return fmt.Errorf("memory: sweep %q: %w", name, webhook.ErrClaimLost)
	}
	sw.position, sw.claim, sw.held = position, "", time.Time{}
	return nil
}
