package redis

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/webhook"
)

// WebhookStore is the Redis [webhook.Store]: the webhook endpoints and the outbox,
// shared by every instance on the Redis. Every operation is one script (or one
// command), atomic in Redis: Enqueue stores the message, remembers its ID and gives
// each endpoint with room its delivery at once; Claim takes the due deliveries, the
// earliest first, and leases them; Record checks the claim and stores the outcome.
// DeleteEndpoint and Prune work in batches of [WebhookBatch], one script each, so that
// no script holds Redis long (see docs/redis.md, "Webhooks").
//
// Every key of the outbox shares one hash tag, {~wh} (after the prefix), so that its
// scripts run on one Redis Cluster slot: the whole outbox lives on one node of a
// Cluster. That is its design: a message is enqueued for several endpoints at once,
// remembered once by its ID, and claimed from one queue of due deliveries by every
// instance, which one slot makes atomic without cross-slot transactions. It is
// bounded (MaxPending pending deliveries per endpoint, MaxEndpoints endpoints per
// account, the retention Prune keeps) and far smaller and quieter than the accounts'
// keys, which a Cluster spreads.
//
// Instants are kept to the nanosecond, on the caller's clock: nothing here reads the
// Redis server's. A WebhookStore is safe for concurrent use. It does not own the
// client. Create it with [NewWebhookStore].
type WebhookStore struct {
	c          goredis.UniversalClient
	keys       []string // the keys of every script, in the order of lua/lib_wh.lua
	maxPending int
	repl       *replication // nil unless WebhookOptions.Replicas
}

// WebhookOptions configures a [WebhookStore]. A nil *WebhookOptions, and every zero
// field, means the default.
type WebhookOptions struct {
	// Prefix begins the name of every key, followed by a colon, as [Options.Prefix]
	// does for a Store; give the same to both. It must not contain braces. The default
	// is "tollgate".
	Prefix string
	// MaxPending is the most deliveries an endpoint may have pending, from 1 to
	// webhook.MaxPending, the default: a lower bound keeps less of a dead endpoint's
	// deliveries in Redis's memory. [WebhookStore.MaxPending] reports it.
	MaxPending int
	// Replicas and WaitTimeout make every write of the store (endpoints, messages
	// enqueued, claims and outcomes of deliveries) wait for replicas before it is
	// acknowledged, as [Options.Replicas] and [Options.WaitTimeout] do for a Store.
	Replicas    int
	WaitTimeout time.Duration
}

// WebhookBatch is the most deliveries one script of DeleteEndpoint or Prune deletes.
const WebhookBatch = 500

// Interface guard.
var _ webhook.Store = (*WebhookStore)(nil)

// NewWebhookStore returns a WebhookStore over client, which may be a *goredis.Client, a
// *goredis.ClusterClient or a failover client. opts may be nil. It does not contact
// Redis.
func NewWebhookStore(client goredis.UniversalClient, opts *WebhookOptions) (*WebhookStore, error) {
	if client == nil {
		return nil, errors.New("redis: NewWebhookStore needs a client")
	}
	var o WebhookOptions
	if opts != nil {
		o = *opts
	}
	var err error
	if o.Prefix, err = checkPrefix(o.Prefix); err != nil {
		return nil, err
	}
	switch {
	case o.MaxPending == 0:
		o.MaxPending = webhook.MaxPending
	case o.MaxPending < 1 || o.MaxPending > webhook.MaxPending:
		return nil, fmt.Errorf("redis: WebhookOptions.MaxPending is %d; give 1 to %d", o.MaxPending, webhook.MaxPending)
	}
	s := &WebhookStore{c: client, maxPending: o.MaxPending}
	if s.repl, err = newReplication(client, o.Prefix, o.Replicas, o.WaitTimeout); err != nil {
		return nil, err
	}
	base := o.Prefix + ":{~wh}:"
	for _, k := range []string{"E", "A", "X", "P", "M", "B", "N", "O", "D", "Q", "F", "L", "S"} {
		s.keys = append(s.keys, base+k)
	}
	return s, nil
}

// MaxPending returns the most deliveries an endpoint may have pending in this store.
func (s *WebhookStore) MaxPending() int { return s.maxPending }

// The keys, by their place in s.keys.
const (
	whEndpoints = 0 // E
	whDue       = 9 // Q
)

// run runs a webhook script on the outbox's keys.
func (s *WebhookStore) run(ctx context.Context, sc *goredis.Script, args ...any) (any, error) {
	return whileSlotMoves(ctx, func() (any, error) { return sc.Run(ctx, s.c, s.keys, args...).Result() })
}

// write runs a webhook script that writes, as run does, or, with
// WebhookOptions.Replicas, waiting for the replicas.
func (s *WebhookStore) write(ctx context.Context, sc *goredis.Script, args ...any) (any, error) {
	if s.repl == nil {
		return s.run(ctx, sc, args...)
	}
	r := s.repl.do(ctx, []scriptCall{{sc: sc, keys: s.keys, args: args}})[0]
	return r.val, r.err
}

// t20 writes an instant for the scripts: Unix nanoseconds in 20 digits, which compare
// as text as the instants do. webhook.CheckTime keeps them from 1970 to 2262.
func t20(t time.Time) string { return fmt.Sprintf("%020d", t.UnixNano()) }

// keep20 writes a message's Keep, 20 zeros for none.
func keep20(t time.Time) string {
	if t.IsZero() {
		return fmt.Sprintf("%020d", 0)
	}
	return t20(t)
}

// from20 reads an instant the scripts keep; "" is the zero time.
func from20(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	ns, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, ns).UTC()
}

// whEndpoint is the JSON of the fields of an endpoint that change (see lua/lib_wh.lua:
// an endpoint's value in E is its revision, creation, account and last success, then
// this).
type whEndpoint struct {
	URL            string   `json:"url"`
	Types          []string `json:"types,omitempty"`
	Secret         string   `json:"secret"`
	PreviousSecret string   `json:"previous_secret,omitempty"`
	PreviousUntil  string   `json:"previous_until,omitempty"`
	Disabled       string   `json:"disabled,omitempty"`
	DisabledReason string   `json:"disabled_reason,omitempty"`
	// DisabledBy is who disabled it; absent while it is enabled, and in the values
	// stored before it was kept.
	DisabledBy string `json:"disabled_by,omitempty"`
}

// endpointFields returns the JSON of e's fields that change.
func endpointFields(e webhook.Endpoint) string {
	w := whEndpoint{URL: e.URL, Types: e.Types, Secret: e.Secret, PreviousSecret: e.PreviousSecret, DisabledReason: e.DisabledReason}
	if !e.PreviousUntil.IsZero() {
		w.PreviousUntil = t20(e.PreviousUntil)
	}
	if !e.Disabled.IsZero() {
		w.Disabled, w.DisabledBy = t20(e.Disabled), e.DisabledBy
	}
	b, _ := json.Marshal(w) // strings only: it cannot fail
	return string(b)
}

// parseEndpoint reads an endpoint's value in E.
func parseEndpoint(id, v string) (webhook.Endpoint, error) {
	f := strings.SplitN(v, "\x00", 5)
	var w whEndpoint
	if len(f) != 5 {
		return webhook.Endpoint{}, fmt.Errorf("redis: webhook endpoint %q: a stored value of %d fields: %w", id, len(f), store.ErrUnavailable)
	}
	rev, err := strconv.ParseInt(f[0], 10, 64)
	if err == nil {
		err = json.Unmarshal([]byte(f[4]), &w)
	}
	if err != nil {
		return webhook.Endpoint{}, fmt.Errorf("redis: webhook endpoint %q: the stored value: %w: %w", id, store.ErrUnavailable, err)
	}
	e := webhook.Endpoint{
		ID: id, Account: f[2], URL: w.URL, Types: w.Types, Secret: w.Secret,
		PreviousSecret: w.PreviousSecret, PreviousUntil: from20(w.PreviousUntil),
		Disabled: from20(w.Disabled), DisabledReason: w.DisabledReason,
		Created: from20(f[1]), LastDelivered: from20(f[3]), Revision: rev,
	}
	if !e.Disabled.IsZero() {
		e.DisabledBy = w.DisabledBy
	}
	return e, nil
}

// CreateEndpoint stores a new endpoint under its account's bound, in one script.
func (s *WebhookStore) CreateEndpoint(ctx context.Context, e webhook.Endpoint) (webhook.Endpoint, error) {
	if err := webhook.CheckEndpoint(e); err != nil {
		return webhook.Endpoint{}, err
	}
	if err := ctx.Err(); err != nil {
		return webhook.Endpoint{}, err
	}
	value := "1\x00" + t20(e.Created) + "\x00" + e.Account + "\x00\x00" + endpointFields(e)
	reply, err := s.write(ctx, whCreateScript, e.ID, e.Account, t20(e.Created), value, webhook.MaxEndpoints)
	if err != nil {
		return webhook.Endpoint{}, fail(ctx, err, "webhook endpoint %q", e.ID)
	}
	switch asInt(reply) {
	case 1:
		return webhook.Endpoint{}, fmt.Errorf("redis: webhook endpoint %q: %w", e.ID, store.ErrConflict)
	case 2:
		return webhook.Endpoint{}, fmt.Errorf("redis: webhook endpoint %q of account %q: %w", e.ID, e.Account, webhook.ErrTooManyEndpoints)
	}
	return parseEndpoint(e.ID, value)
}

// Endpoint returns the endpoint with the ID, with one HGET.
func (s *WebhookStore) Endpoint(ctx context.Context, id string) (webhook.Endpoint, error) {
	if err := webhook.CheckID("endpoint id", id); err != nil {
		return webhook.Endpoint{}, err
	}
	if err := ctx.Err(); err != nil {
		return webhook.Endpoint{}, err
	}
	v, err := s.c.HGet(ctx, s.keys[whEndpoints], id).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return webhook.Endpoint{}, fmt.Errorf("redis: webhook endpoint %q: %w", id, store.ErrNotFound)
	case err != nil:
		return webhook.Endpoint{}, fail(ctx, err, "webhook endpoint %q", id)
	}
	return parseEndpoint(id, v)
}

// Endpoints returns the endpoints of account, oldest first, in one script.
func (s *WebhookStore) Endpoints(ctx context.Context, account string) ([]webhook.Endpoint, error) {
	if err := webhook.CheckAccount(account); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply, err := s.run(ctx, whEndpointsScript, account)
	if err != nil {
		return nil, fail(ctx, err, "webhook endpoints of account %q", account)
	}
	var out []webhook.Endpoint
	for _, r := range asSlice(reply) {
		r := asSlice(r)
		if len(r) != 2 {
			return nil, errReply("webhook endpoints of account "+strconv.Quote(account), reply)
		}
		e, err := parseEndpoint(asString(r[0]), asString(r[1]))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// UpdateEndpoint replaces the endpoint at the revision it was read at, in one script.
func (s *WebhookStore) UpdateEndpoint(ctx context.Context, e webhook.Endpoint) (webhook.Endpoint, error) {
	// Account and Created are not changed: check the others.
	check := e
	check.Account, check.Created = "", time.Unix(0, 0)
	if err := webhook.CheckEndpoint(check); err != nil {
		return webhook.Endpoint{}, err
	}
	if err := ctx.Err(); err != nil {
		return webhook.Endpoint{}, err
	}
	reply, err := s.write(ctx, whUpdateScript, e.ID, strconv.FormatInt(e.Revision, 10), endpointFields(e))
	if err != nil {
		return webhook.Endpoint{}, fail(ctx, err, "webhook endpoint %q", e.ID)
	}
	r := asSlice(reply)
	if len(r) == 0 {
		return webhook.Endpoint{}, errReply("webhook endpoint "+strconv.Quote(e.ID), reply)
	}
	if asInt(r[0]) == 1 {
		return webhook.Endpoint{}, fmt.Errorf("redis: webhook endpoint %q: %w", e.ID, store.ErrNotFound)
	}
	if len(r) != 2 {
		return webhook.Endpoint{}, errReply("webhook endpoint "+strconv.Quote(e.ID), reply)
	}
	got, err := parseEndpoint(e.ID, asString(r[1]))
	switch {
	case err != nil:
		return webhook.Endpoint{}, err
	case asInt(r[0]) == 2:
		return webhook.Endpoint{}, fmt.Errorf("redis: webhook endpoint %q changed since it was read (revision %d, now %d): %w",
			e.ID, e.Revision, got.Revision, store.ErrConflict)
	}
	return got, nil
}

// DeleteEndpoint deletes the endpoint, then its deliveries, a batch per script: the
// first takes the endpoint out of every listing and lookup at once.
func (s *WebhookStore) DeleteEndpoint(ctx context.Context, id string) error {
	if err := webhook.CheckID("endpoint id", id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	found := false
	for first := true; ; first = false {
		reply, err := s.write(ctx, whDeleteScript, id, WebhookBatch)
		if err != nil {
			return fail(ctx, err, "deleting webhook endpoint %q", id)
		}
		r := asSlice(reply)
		if len(r) != 2 {
			return errReply("deleting webhook endpoint "+strconv.Quote(id), reply)
		}
		if first {
			found = asInt(r[0]) == 1
		}
		if asInt(r[1]) == 0 {
			break
		}
	}
	if !found {
		return fmt.Errorf("redis: webhook endpoint %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// Enqueue stores m with a pending delivery for each endpoint that has room, all at
// once, unless its ID is remembered, in one script.
func (s *WebhookStore) Enqueue(ctx context.Context, m webhook.Message, endpoints []string, now time.Time) (bool, []string, error) {
	if err := webhook.CheckEnqueue(m, endpoints, now); err != nil {
		return false, nil, err
	}
	if err := ctx.Err(); err != nil {
		return false, nil, err
	}
	at, keep := t20(m.At), ""
	if !m.Keep.IsZero() {
		keep = t20(m.Keep)
	}
	args := make([]any, 0, 7+len(endpoints))
	args = append(args, m.ID, at+"\x00"+keep+"\x00"+m.Type+"\x00"+m.Account, m.Body, at, keep20(m.Keep), t20(now), s.maxPending)
	for _, e := range endpoints {
		args = append(args, e)
	}
	reply, err := s.write(ctx, whEnqueueScript, args...)
	if err != nil {
		return false, nil, fail(ctx, err, "webhook message %q", m.ID)
	}
	r := asSlice(reply)
	if len(r) == 0 {
		return false, nil, errReply("webhook message "+strconv.Quote(m.ID), reply)
	}
	if asInt(r[0]) == 0 {
		return false, nil, nil
	}
	var dropped []string
	if len(r) > 1 {
		for _, e := range asSlice(r[1]) {
			dropped = append(dropped, asString(e))
		}
	}
	return true, dropped, nil
}

// parseDelivery reads a delivery the scripts return: {its field in D, its value, its
// message's value in M, its body} (see lua/lib_wh.lua).
func parseDelivery(reply any) (webhook.Delivery, error) {
	r := asSlice(reply)
	if len(r) != 4 {
		return webhook.Delivery{}, errReply("webhook delivery", reply)
	}
	endpoint, message, ok := strings.Cut(asString(r[0]), "\x00")
	d := strings.SplitN(asString(r[1]), "\x00", 10)
	m := strings.SplitN(asString(r[2]), "\x00", 4)
	if !ok || len(d) != 10 || len(m) != 4 {
		return webhook.Delivery{}, errReply("webhook delivery", reply)
	}
	state, _ := strconv.Atoi(d[0])
	attempts, _ := strconv.Atoi(d[1])
	status, _ := strconv.Atoi(d[4])
	out := webhook.Delivery{
		Endpoint: endpoint,
		Message: webhook.Message{ID: message, Type: m[2], Account: m[3], At: from20(m[0]),
			Keep: from20(m[1]), Body: []byte(asString(r[3]))},
		State: webhook.State(state), Attempts: attempts, Due: from20(d[2]),
		Last:  webhook.Attempt{At: from20(d[3]), Status: status, Error: d[9]},
		Claim: d[5],
	}
	return out, nil
}

// parseDeliveries reads a list of deliveries the scripts return.
func parseDeliveries(reply any) ([]webhook.Delivery, error) {
	var out []webhook.Delivery
	for _, r := range asSlice(reply) {
		d, err := parseDelivery(r)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Claim leases up to limit due deliveries, the earliest due first, to a new claim, in
// one script.
func (s *WebhookStore) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]webhook.Delivery, error) {
	if err := webhook.CheckClaim(now, lease, limit); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply, err := s.write(ctx, whClaimScript, t20(now.Add(time.Nanosecond)), t20(now.Add(lease)), rand.Text(), limit)
	if err != nil {
		return nil, fail(ctx, err, "claiming webhook deliveries")
	}
	return parseDeliveries(reply)
}

// Record stores the outcome of a delivery its claim holds, and a success in its
// endpoint's LastDelivered, in one script.
func (s *WebhookStore) Record(ctx context.Context, o webhook.Outcome) error {
	o, err := webhook.CheckOutcome(o)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	due := ""
	if o.State == webhook.Pending {
		due = t20(o.Due)
	}
	at := ""
	if o.Attempted() {
		at = t20(o.Attempt.At)
	}
	reply, err := s.write(ctx, whRecordScript, o.Endpoint, o.Message, o.Claim, int(o.State), due,
		at, o.Attempt.Status, o.Attempt.Error)
	if err != nil {
		return fail(ctx, err, "webhook delivery of message %q to endpoint %q", o.Message, o.Endpoint)
	}
	switch asInt(reply) {
	case 1:
		return fmt.Errorf("redis: webhook delivery of message %q to endpoint %q: %w", o.Message, o.Endpoint, webhook.ErrClaimLost)
	case 2:
		return fmt.Errorf("redis: webhook delivery of message %q to endpoint %q: %w", o.Message, o.Endpoint, store.ErrNotFound)
	}
	return nil
}

// Deliveries returns a page of the endpoint's deliveries, newest message first, in one
// script.
func (s *WebhookStore) Deliveries(ctx context.Context, endpoint string, q webhook.Query) (webhook.Page, error) {
	if err := webhook.CheckID("endpoint id", endpoint); err != nil {
		return webhook.Page{}, err
	}
	limit, pos, after, err := webhook.ParseQuery(q)
	if err != nil {
		return webhook.Page{}, err
	}
	if err := ctx.Err(); err != nil {
		return webhook.Page{}, err
	}
	upper := "(" + endpoint + "\x01"
	if after {
		upper = "(" + endpoint + "\x00" + t20(pos.At) + pos.Message
	}
	reply, err := s.run(ctx, whListScript, endpoint, upper, limit+1)
	if err != nil {
		return webhook.Page{}, fail(ctx, err, "webhook deliveries of endpoint %q", endpoint)
	}
	ds, err := parseDeliveries(reply)
	if err != nil {
		return webhook.Page{}, err
	}
	for i := range ds {
		ds[i].Claim = ""
	}
	return webhook.PageOf(ds, limit), nil
}

// Resend makes a delivery pending again, due at now, ending any claim of it, in one
// script.
func (s *WebhookStore) Resend(ctx context.Context, endpoint, message string, now time.Time) (webhook.Delivery, error) {
	if err := webhook.CheckResend(endpoint, message, now); err != nil {
		return webhook.Delivery{}, err
	}
	if err := ctx.Err(); err != nil {
		return webhook.Delivery{}, err
	}
	reply, err := s.write(ctx, whResendScript, endpoint, message, t20(now))
	if err != nil {
		return webhook.Delivery{}, fail(ctx, err, "webhook delivery of message %q to endpoint %q", message, endpoint)
	}
	if len(asSlice(reply)) == 0 {
		return webhook.Delivery{}, fmt.Errorf("redis: webhook delivery of message %q to endpoint %q: %w", message, endpoint, store.ErrNotFound)
	}
	return parseDelivery(reply)
}

// Pending returns the number of pending deliveries, with one ZCARD.
func (s *WebhookStore) Pending(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.c.ZCard(ctx, s.keys[whDue]).Result()
	if err != nil {
		return 0, fail(ctx, err, "counting pending webhook deliveries")
	}
	return n, nil
}

// Prune deletes the finished deliveries whose last attempt was before before, and the
// messages left with no delivery whose Keep is before it, a batch per script, and
// finishes the deletions of endpoints that stopped half-way.
func (s *WebhookStore) Prune(ctx context.Context, before time.Time) (int64, error) {
	if err := webhook.CheckTime("prune's instant", before); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var n int64
	for {
		reply, err := s.write(ctx, whPruneScript, t20(before), WebhookBatch)
		if err != nil {
			return n, fail(ctx, err, "pruning webhook deliveries before %s", before.Format(time.RFC3339Nano))
		}
		r := asSlice(reply)
		if len(r) != 2 {
			return n, errReply("pruning webhook deliveries", reply)
		}
		n += asInt(r[0])
		if asInt(r[1]) == 0 {
			return n, nil
		}
	}
}

// ClaimSweep claims a sweep unless a claim within its lease holds it, in one script.
func (s *WebhookStore) ClaimSweep(ctx context.Context, name string, now time.Time, lease time.Duration) (webhook.SweepClaim, bool, error) {
	if err := ctx.Err(); err != nil {
		return webhook.SweepClaim{}, false, err
	}
	if err := webhook.CheckSweepClaim(name, now, lease); err != nil {
		return webhook.SweepClaim{}, false, err
	}
	c := webhook.SweepClaim{Claim: rand.Text()}
	reply, err := s.write(ctx, whSweepClaimScript, name, c.Claim, t20(now), t20(now.Add(lease)))
	if errors.Is(err, goredis.Nil) {
		return webhook.SweepClaim{}, false, nil
	}
	if err != nil {
		return webhook.SweepClaim{}, false, fail(ctx, err, "claiming webhook sweep %q", name)
	}
	c.Position = asString(reply)
	return c, true, nil
}

// RecordSweep stores a sweep's position and ends its claim, if the claim holds it, in
// one script.
func (s *WebhookStore) RecordSweep(ctx context.Context, name, claim, position string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := webhook.CheckSweepRecord(name, claim, position); err != nil {
		return err
	}
	reply, err := s.write(ctx, whSweepRecordScript, name, claim, position)
	if err != nil {
		return fail(ctx, err, "recording webhook sweep %q", name)
	}
	if asInt(reply) != 0 {
		return fmt.Errorf("redis: sweep %q: %w", name, webhook.ErrClaimLost)
	}
	return nil
}
