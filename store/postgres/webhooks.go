package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/webhook"
)

// WebhookStore is the PostgreSQL [webhook.Store]: the webhook endpoints and the outbox,
// in the tables tollgate_webhook_endpoints, tollgate_webhook_endpoint_shards,
// tollgate_webhook_messages and tollgate_webhook_deliveries, shared by every instance
// on the database. Every method is one round trip: one statement, or one call of a
// function of migrations 24 and 26. Claim takes the due deliveries with FOR UPDATE
// SKIP LOCKED, so that deliverers on any number of instances claim side by side
// without waiting for each other.
//
// An endpoint's pending deliveries and its last success are counted in shards of it
// (16 for an operator's endpoint, which receives every account's events; 4 for an
// account's), not in its row: an enqueue, an outcome or a resend holds the endpoint's
// row only FOR KEY SHARE, which none of them waits on, and writes one shard, so that
// the enqueues of every account do not wait on each other at the operator's
// endpoints. The bound, [WebhookStore.MaxPending], is exact nonetheless: an endpoint
// never has more pending deliveries by Enqueue, and an enqueue is dropped only when
// the endpoint has that many. Far from the bound, an enqueue holds one shard at random
// and checks the sum under it (the other enqueues in flight hold the other shards);
// within a shard count of it, it holds every shard of the endpoint and counts
// exactly, so that the enqueues near an endpoint's bound wait on each other. (The
// bound is judged in READ COMMITTED, PostgreSQL's default: give the store a pool or a
// connection, not a transaction of a stricter isolation.) Every change takes the
// endpoint before its deliveries and shards, so none waits on another in a cycle.
//
// It holds no state besides its DB and options, and is safe for concurrent use when its
// DB is. Create it with [NewWebhookStore], after [Migrate] has run.
type WebhookStore struct {
	db         DB
	maxPending int
}

// WebhookOptions configures a [WebhookStore]. A nil *WebhookOptions is the default.
type WebhookOptions struct {
	// MaxPending is the most deliveries an endpoint may have pending, from 1 to
	// webhook.MaxPending, the default: a lower bound keeps less of a dead endpoint's
	// deliveries. [WebhookStore.MaxPending] reports it.
	MaxPending int
}

// Interface guard.
var _ webhook.Store = (*WebhookStore)(nil)

// NewWebhookStore returns a WebhookStore on db. It does not touch the database: run
// [Migrate] first. opts may be nil.
func NewWebhookStore(db DB, opts *WebhookOptions) (*WebhookStore, error) {
	if db == nil {
		return nil, errors.New("postgres: NewWebhookStore needs a DB (a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx)")
	}
	s := &WebhookStore{db: db, maxPending: webhook.MaxPending}
	if opts != nil && opts.MaxPending != 0 {
		if opts.MaxPending < 1 || opts.MaxPending > webhook.MaxPending {
			return nil, fmt.Errorf("postgres: WebhookOptions.MaxPending is %d; give 1 to %d", opts.MaxPending, webhook.MaxPending)
		}
		s.maxPending = opts.MaxPending
	}
	return s, nil
}

// MaxPending returns the most deliveries an endpoint may have pending in this store.
func (s *WebhookStore) MaxPending() int { return s.maxPending }

// The columns of an endpoint as e, in the order scanEndpoint reads them: its last
// success is the latest of its shards'.
const endpointColumns = `e.id, e.account_id, e.url, e.types, e.secret, e.previous_secret, e.previous_until, e.disabled,
	e.disabled_reason, e.disabled_by, e.created,
	(SELECT max(s.last_delivered) FROM tollgate_webhook_endpoint_shards s WHERE s.endpoint_id = e.id), e.revision`

// scanEndpoint reads an endpoint's columns (endpointColumns).
func scanEndpoint(row pgx.Row) (webhook.Endpoint, error) {
	var (
		e                                      webhook.Endpoint
		previousUntil, disabled, lastDelivered *int64
		created                                int64
	)
	err := row.Scan(&e.ID, &e.Account, &e.URL, &e.Types, &e.Secret, &e.PreviousSecret, &previousUntil, &disabled,
		&e.DisabledReason, &e.DisabledBy, &created, &lastDelivered, &e.Revision)
	if len(e.Types) == 0 {
		e.Types = nil
	}
	if disabled == nil {
		e.DisabledBy = "" // left by an enabling of an instance of schema version 25
	}
	e.PreviousUntil, e.Disabled, e.Created = fromNanos(previousUntil), fromNanos(disabled), time.Unix(0, created).UTC()
	e.LastDelivered = fromNanos(lastDelivered)
	return e, err
}

// CreateEndpoint stores a new endpoint, under the account's bound, in one call of
// tollgate_webhook_create_endpoint.
func (s *WebhookStore) CreateEndpoint(ctx context.Context, e webhook.Endpoint) (webhook.Endpoint, error) {
	if err := webhook.CheckEndpoint(e); err != nil {
		return webhook.Endpoint{}, err
	}
	var status int
	err := s.db.QueryRow(ctx, `SELECT tollgate_webhook_create_endpoint($1::text, $2::text, $3::text, $4::text[], $5::text, $6::text,
			$7::bigint, $8::bigint, $9::text, $10::bigint, $11::int, $12::text)`,
		e.ID, e.Account, e.URL, types(e.Types), e.Secret, e.PreviousSecret, nanos(e.PreviousUntil), nanos(e.Disabled),
		e.DisabledReason, e.Created.UnixNano(), webhook.MaxEndpoints, e.DisabledBy).Scan(&status)
	switch {
	case err != nil:
		return webhook.Endpoint{}, wrapErr(ctx, err, "webhook endpoint %q", e.ID)
	case status == 2:
		return webhook.Endpoint{}, fmt.Errorf("postgres: webhook endpoint %q of account %q: %w", e.ID, e.Account, webhook.ErrTooManyEndpoints)
	}
	e.Revision, e.LastDelivered = 1, time.Time{}
	e.Types = types(e.Types)
	if len(e.Types) == 0 {
		e.Types = nil
	}
	e.Created, e.PreviousUntil, e.Disabled = e.Created.UTC(), fromNanos(nanos(e.PreviousUntil)), fromNanos(nanos(e.Disabled))
	if e.Disabled.IsZero() {
		e.DisabledBy = ""
	}
	return e, nil
}

// Endpoint returns the endpoint with the ID, in one statement.
func (s *WebhookStore) Endpoint(ctx context.Context, id string) (webhook.Endpoint, error) {
	if err := webhook.CheckID("endpoint id", id); err != nil {
		return webhook.Endpoint{}, err
	}
	e, err := scanEndpoint(s.db.QueryRow(ctx, `SELECT `+endpointColumns+` FROM tollgate_webhook_endpoints e WHERE e.id = $1::text`, id))
	if err != nil {
		return webhook.Endpoint{}, wrapErr(ctx, err, "webhook endpoint %q", id)
	}
	return e, nil
}

// Endpoints returns the endpoints of account, oldest first, in one statement.
func (s *WebhookStore) Endpoints(ctx context.Context, account string) ([]webhook.Endpoint, error) {
	if err := webhook.CheckAccount(account); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT `+endpointColumns+` FROM tollgate_webhook_endpoints e
		WHERE e.account_id = $1::text ORDER BY e.created, e.id`, account)
	if err != nil {
		return nil, wrapErr(ctx, err, "webhook endpoints of account %q", account)
	}
	defer rows.Close()
	var out []webhook.Endpoint
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, wrapErr(ctx, err, "webhook endpoints of account %q", account)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(ctx, err, "webhook endpoints of account %q", account)
	}
	return out, nil
}

// UpdateEndpoint replaces the endpoint at the revision it was read at, in one
// statement: the UPDATE conditioned on the revision, and the stored row when it
// changed nothing, to tell a missing endpoint from a changed one.
func (s *WebhookStore) UpdateEndpoint(ctx context.Context, e webhook.Endpoint) (webhook.Endpoint, error) {
	// Account and Created are not changed: check the others.
	check := e
	check.Account, check.Created = "", time.Unix(0, 0)
	if err := webhook.CheckEndpoint(check); err != nil {
		return webhook.Endpoint{}, err
	}
	var updated bool
	row := s.db.QueryRow(ctx, `WITH u AS (
			UPDATE tollgate_webhook_endpoints e
			   SET url = $3::text, types = $4::text[], secret = $5::text, previous_secret = $6::text,
			       previous_until = $7::bigint, disabled = $8::bigint, disabled_reason = $9::text,
			       disabled_by = CASE WHEN $8::bigint IS NULL THEN '' ELSE $10::text END, revision = e.revision + 1
			 WHERE e.id = $1::text AND e.revision = $2::bigint
			RETURNING `+endpointColumns+`)
		SELECT true, u.* FROM u
		UNION ALL
		SELECT false, `+endpointColumns+` FROM tollgate_webhook_endpoints e WHERE e.id = $1::text AND NOT EXISTS (SELECT 1 FROM u)`,
		e.ID, e.Revision, e.URL, types(e.Types), e.Secret, e.PreviousSecret, nanos(e.PreviousUntil), nanos(e.Disabled), e.DisabledReason,
		e.DisabledBy)
	got, err := scanEndpoint(updatedRow{row, &updated})
	switch {
	case err != nil:
		return webhook.Endpoint{}, wrapErr(ctx, err, "webhook endpoint %q", e.ID)
	case !updated:
		return webhook.Endpoint{}, fmt.Errorf("postgres: webhook endpoint %q changed since it was read (revision %d, now %d): %w",
			e.ID, e.Revision, got.Revision, store.ErrConflict)
	}
	return got, nil
}

// updatedRow is a row whose first column is a flag, read into updated, before the
// columns the caller scans.
type updatedRow struct {
	pgx.Row
	updated *bool
}

func (r updatedRow) Scan(dest ...any) error { return r.Row.Scan(append([]any{r.updated}, dest...)...) }

// DeleteEndpoint deletes the endpoint and its deliveries, in one call of
// tollgate_webhook_delete_endpoint.
func (s *WebhookStore) DeleteEndpoint(ctx context.Context, id string) error {
	if err := webhook.CheckID("endpoint id", id); err != nil {
		return err
	}
	var found bool
	if err := s.db.QueryRow(ctx, `SELECT tollgate_webhook_delete_endpoint($1::text)`, id).Scan(&found); err != nil {
		return wrapErr(ctx, err, "webhook endpoint %q", id)
	}
	if !found {
		return fmt.Errorf("postgres: webhook endpoint %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// Enqueue stores m with a pending delivery for each endpoint that has room, all at
// once, unless its ID is taken, in one call of tollgate_webhook_enqueue.
func (s *WebhookStore) Enqueue(ctx context.Context, m webhook.Message, endpoints []string, now time.Time) (bool, []string, error) {
	if err := webhook.CheckEnqueue(m, endpoints, now); err != nil {
		return false, nil, err
	}
	if endpoints == nil {
		endpoints = []string{}
	}
	body := m.Body
	if body == nil {
		body = []byte{}
	}
	var (
		fresh   bool
		dropped []string
	)
	err := s.db.QueryRow(ctx, `SELECT o_fresh, o_dropped FROM tollgate_webhook_enqueue($1::text, $2::text, $3::text, $4::bigint,
			$5::bytea, $6::bigint, $7::text[], $8::bigint, $9::int)`,
		m.ID, m.Type, m.Account, m.At.UnixNano(), body, keepNanos(m.Keep), endpoints, now.UnixNano(), s.maxPending).Scan(&fresh, &dropped)
	if err != nil {
		return false, nil, wrapErr(ctx, err, "webhook message %q", m.ID)
	}
	if len(dropped) == 0 {
		dropped = nil
	}
	return fresh, dropped, nil
}

// The columns of a delivery with its message, in the order scanDelivery reads them,
// from the deliveries as d and the messages as m.
const deliveryColumns = `d.endpoint_id, d.state, d.attempts, d.due, d.last_at, d.last_status, d.last_error,
	m.id, m.type, m.account_id, m.at, m.body, m.keep`

// scanDelivery reads a delivery's columns (deliveryColumns).
func scanDelivery(row pgx.Row) (webhook.Delivery, error) {
	var (
		d           webhook.Delivery
		state       int16
		due, lastAt *int64
		at, keep    int64
	)
	err := row.Scan(&d.Endpoint, &state, &d.Attempts, &due, &lastAt, &d.Last.Status, &d.Last.Error,
		&d.Message.ID, &d.Message.Type, &d.Message.Account, &at, &d.Message.Body, &keep)
	d.State, d.Due, d.Last.At = webhook.State(state), fromNanos(due), fromNanos(lastAt)
	d.Message.At = time.Unix(0, at).UTC()
	if keep >= 0 {
		d.Message.Keep = time.Unix(0, keep).UTC()
	}
	return d, err
}

// Claim leases up to limit due deliveries, the earliest due first, to a new claim, in
// one statement that skips the deliveries other claims are taking.
func (s *WebhookStore) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]webhook.Delivery, error) {
	if err := webhook.CheckClaim(now, lease, limit); err != nil {
		return nil, err
	}
	claim := rand.Text()
	rows, err := s.db.Query(ctx, `WITH c AS (
			SELECT x.endpoint_id, x.message_id, x.due FROM tollgate_webhook_deliveries x
			 WHERE x.state = 1 AND x.due <= $1::bigint
			 ORDER BY x.due LIMIT $3::int
			   FOR UPDATE SKIP LOCKED),
		d AS (
			UPDATE tollgate_webhook_deliveries x SET claim = $4::text, due = $2::bigint
			  FROM c WHERE x.endpoint_id = c.endpoint_id AND x.message_id = c.message_id
			RETURNING x.*, c.due AS was)
		SELECT `+deliveryColumns+`
		  FROM d JOIN tollgate_webhook_messages m ON m.id = d.message_id
		 ORDER BY d.was, d.endpoint_id, d.message_id`,
		now.UnixNano(), now.Add(lease).UnixNano(), limit, claim)
	if err != nil {
		return nil, wrapErr(ctx, err, "claiming webhook deliveries")
	}
	defer rows.Close()
	var out []webhook.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, wrapErr(ctx, err, "claiming webhook deliveries")
		}
		d.Claim = claim
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(ctx, err, "claiming webhook deliveries")
	}
	return out, nil
}

// Record stores the outcome of a delivery its claim holds, and a success in its
// endpoint's last_delivered, in one call of tollgate_webhook_record.
func (s *WebhookStore) Record(ctx context.Context, o webhook.Outcome) error {
	o, err := webhook.CheckOutcome(o)
	if err != nil {
		return err
	}
	var status int
	err = s.db.QueryRow(ctx, `SELECT tollgate_webhook_record($1::text, $2::text, $3::text, $4::smallint, $5::bigint,
			$6::bigint, $7::int, $8::text)`,
		o.Endpoint, o.Message, o.Claim, int16(o.State), nanos(o.Due), nanos(o.Attempt.At), o.Attempt.Status, o.Attempt.Error).Scan(&status)
	switch {
	case err != nil:
		return wrapErr(ctx, err, "webhook delivery of message %q to endpoint %q", o.Message, o.Endpoint)
	case status == 1:
		return fmt.Errorf("postgres: webhook delivery of message %q to endpoint %q: %w", o.Message, o.Endpoint, webhook.ErrClaimLost)
	case status == 2:
		return fmt.Errorf("postgres: webhook delivery of message %q to endpoint %q: %w", o.Message, o.Endpoint, store.ErrNotFound)
	}
	return nil
}

// Deliveries returns a page of the endpoint's deliveries, newest message first, in one
// statement on the index of an endpoint's deliveries by their message's time.
func (s *WebhookStore) Deliveries(ctx context.Context, endpoint string, q webhook.Query) (webhook.Page, error) {
	if err := webhook.CheckID("endpoint id", endpoint); err != nil {
		return webhook.Page{}, err
	}
	limit, pos, after, err := webhook.ParseQuery(q)
	if err != nil {
		return webhook.Page{}, err
	}
	var posAt *int64
	if after {
		posAt = ptr(pos.At.UnixNano())
	}
	rows, err := s.db.Query(ctx, `SELECT `+deliveryColumns+`
		  FROM tollgate_webhook_deliveries d JOIN tollgate_webhook_messages m ON m.id = d.message_id
		 WHERE d.endpoint_id = $1::text AND ($2::bigint IS NULL OR (d.at, d.message_id) < ($2::bigint, $3::text COLLATE "C"))
		 ORDER BY d.at DESC, d.message_id DESC
		 LIMIT $4::int`,
		endpoint, posAt, pos.Message, limit+1)
	if err != nil {
		return webhook.Page{}, wrapErr(ctx, err, "webhook deliveries of endpoint %q", endpoint)
	}
	defer rows.Close()
	var found []webhook.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return webhook.Page{}, wrapErr(ctx, err, "webhook deliveries of endpoint %q", endpoint)
		}
		found = append(found, d)
	}
	if err := rows.Err(); err != nil {
		return webhook.Page{}, wrapErr(ctx, err, "webhook deliveries of endpoint %q", endpoint)
	}
	return webhook.PageOf(found, limit), nil
}

// Resend makes a delivery pending again, due at now, ending any claim of it, in one
// call of tollgate_webhook_resend, which returns what changes with it.
func (s *WebhookStore) Resend(ctx context.Context, endpoint, message string, now time.Time) (webhook.Delivery, error) {
	if err := webhook.CheckResend(endpoint, message, now); err != nil {
		return webhook.Delivery{}, err
	}
	// The function's changes are not in the snapshot of the statement that called it:
	// the delivery is what it returns, in the state and at the due time it set, and
	// the message, which no change touches.
	d, err := scanDelivery(s.db.QueryRow(ctx, `SELECT $1::text, 1::smallint, r.o_attempts, $3::bigint, r.o_last_at, r.o_last_status, r.o_last_error,
		       m.id, m.type, m.account_id, m.at, m.body, m.keep
		  FROM tollgate_webhook_resend($1::text, $2::text, $3::bigint) r, tollgate_webhook_messages m
		 WHERE m.id = $2::text`,
		endpoint, message, now.UnixNano()))
	if err != nil {
		return webhook.Delivery{}, wrapErr(ctx, err, "webhook delivery of message %q to endpoint %q", message, endpoint)
	}
	return d, nil
}

// Pending returns the number of pending deliveries: the sum of the endpoints' shards'
// counts, in one statement.
func (s *WebhookStore) Pending(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT coalesce(sum(pending), 0)::bigint FROM tollgate_webhook_endpoint_shards`).Scan(&n); err != nil {
		return 0, wrapErr(ctx, err, "counting pending webhook deliveries")
	}
	return n, nil
}

// Prune deletes the finished deliveries whose last attempt was before before, and the
// messages left with no delivery whose Keep is before it, in one call of
// tollgate_webhook_prune.
func (s *WebhookStore) Prune(ctx context.Context, before time.Time) (int64, error) {
	if err := webhook.CheckTime("prune's instant", before); err != nil {
		return 0, err
	}
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT tollgate_webhook_prune($1::bigint)`, before.UnixNano()).Scan(&n); err != nil {
		return 0, wrapErr(ctx, err, "pruning webhook deliveries before %s", before.Format(time.RFC3339Nano))
	}
	return n, nil
}

// fromNanos returns the instant of Unix nanoseconds ns, in UTC; the zero time for nil.
func fromNanos(ns *int64) time.Time {
	if ns == nil {
		return time.Time{}
	}
	return time.Unix(0, *ns).UTC()
}

// keepNanos returns a message's Keep in Unix nanoseconds, -1 for none: before every
// instant a prune is given.
func keepNanos(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixNano()
}

// types returns an endpoint's types for a text[] column: never nil, which would be
// NULL.
func types(ts []string) []string {
	if ts == nil {
		return []string{}
	}
	return ts
}

// ClaimSweep claims a sweep unless a claim within its lease holds it, in one
// statement: an insert of the sweep's row, or an update of it when no claim holds it.
func (s *WebhookStore) ClaimSweep(ctx context.Context, name string, now time.Time, lease time.Duration) (webhook.SweepClaim, bool, error) {
	if err := webhook.CheckSweepClaim(name, now, lease); err != nil {
		return webhook.SweepClaim{}, false, err
	}
	c := webhook.SweepClaim{Claim: rand.Text()}
	err := s.db.QueryRow(ctx, `
		INSERT INTO tollgate_webhook_sweeps AS s (name, claim, held_until) VALUES ($1::text, $2::text, $3::bigint)
		ON CONFLICT (name) DO UPDATE SET claim = $2::text, held_until = $3::bigint
		 WHERE s.claim IS NULL OR s.held_until <= $4::bigint
		RETURNING s.position`, name, c.Claim, now.Add(lease).UnixNano(), now.UnixNano()).Scan(&c.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return webhook.SweepClaim{}, false, nil
	}
	if err != nil {
		return webhook.SweepClaim{}, false, wrapErr(ctx, err, "claiming webhook sweep %q", name)
	}
	return c, true, nil
}

// RecordSweep stores a sweep's position and ends its claim, if the claim holds it, in
// one statement.
func (s *WebhookStore) RecordSweep(ctx context.Context, name, claim, position string) error {
	if err := webhook.CheckSweepRecord(name, claim, position); err != nil {
		return err
	}
	tag, err := s.db.Exec(ctx, `UPDATE tollgate_webhook_sweeps SET position = $3::text, claim = NULL, held_until = NULL
		WHERE name = $1::text AND claim = $2::text`, name, claim, position)
	if err != nil {
		return wrapErr(ctx, err, "recording webhook sweep %q", name)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: sweep %q: %w", name, webhook.ErrClaimLost)
	}
	return nil
}
