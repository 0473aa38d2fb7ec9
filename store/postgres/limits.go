package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// gcraParams returns the emission interval and the window (Burst intervals) of a limit,
// in nanoseconds, as driver.GCRA computes them.
func gcraParams(l driver.Limit) (e, window int64, err error) {
	if l.Rate <= 0 || l.Per <= 0 || l.Burst <= 0 || l.Interval() <= 0 {
		return 0, 0, fmt.Errorf("rate limit %+v: rate, period, burst and the interval between events must be positive", l)
	}
	e = int64(l.Interval())
	return e, e * int64(l.Burst), nil
}

// eventsParams returns the emission interval of n events at once and the window of a
// limit, in nanoseconds: the database decides n events as one event n emission
// intervals long (see driver.GCRAN).
func eventsParams(l driver.Limit, n int) (e, window int64, err error) {
	e, window, err = gcraParams(l)
	if err == nil {
		err = l.CheckEvents(n)
	}
	return e * int64(n), window, err
}

// Allow decides whether one event for key may go ahead at now and records it if so, in
// one call. The decision is driver.GCRA's, on the stored timestamp.
func (s *Store) Allow(ctx context.Context, key string, l driver.Limit, now time.Time) (driver.RateDecision, error) {
	return s.AllowN(ctx, key, l, 1, now)
}

// AllowN decides whether n events for key may go ahead together at now and records
// them if so, in one call. The decision is driver.GCRAN's, on the stored timestamp.
func (s *Store) AllowN(ctx context.Context, key string, l driver.Limit, n int, now time.Time) (driver.RateDecision, error) {
	if err := ctx.Err(); err != nil {
		return driver.RateDecision{}, wrapErr(ctx, err, "rate limit of %q", key)
	}
	e, window, err := eventsParams(l, n)
	if err != nil {
		return driver.RateDecision{}, fmt.Errorf("postgres: rate limit of %q: %w", key, err)
	}
	var tat int64
	if err := s.db.QueryRow(ctx, `SELECT tollgate_rate_allow($1, $2, $3, $4)`, key, now.UnixNano(), e, window).Scan(&tat); err != nil {
		return driver.RateDecision{}, wrapErr(ctx, err, "rate limit of %q", key)
	}
	d, _ := driver.GCRAN(l, n, tat, now.UnixNano())
	return d, nil
}

// Peek reports what Allow would decide, without recording anything, in one statement.
func (s *Store) Peek(ctx context.Context, key string, l driver.Limit, now time.Time) (driver.RateDecision, error) {
	if err := ctx.Err(); err != nil {
		return driver.RateDecision{}, wrapErr(ctx, err, "rate limit of %q", key)
	}
	if _, _, err := gcraParams(l); err != nil {
		return driver.RateDecision{}, fmt.Errorf("postgres: %w", err)
	}
	var tat int64
	err := s.db.QueryRow(ctx, `SELECT coalesce((SELECT r.tat FROM tollgate_rate_limits r WHERE r.key = $1), 0)`, key).Scan(&tat)
	if err != nil {
		return driver.RateDecision{}, wrapErr(ctx, err, "rate limit of %q", key)
	}
	d, _ := driver.GCRA(l, tat, now.UnixNano())
	return d, nil
}

// Acquire grants holder a slot of key until now+lease if fewer than ceiling live slots
// are held, in one call.
func (s *Store) Acquire(ctx context.Context, key string, holder driver.RequestID, ceiling int, lease time.Duration, now time.Time) (driver.SlotDecision, error) {
	if err := ctx.Err(); err != nil {
		return driver.SlotDecision{}, wrapErr(ctx, err, "slot of %s under %q", holder, key)
	}
	var d driver.SlotDecision
	err := s.db.QueryRow(ctx, `SELECT o_acquired, o_in_use FROM tollgate_slot_acquire($1, $2, $3, $4, $5)`,
		key, uuidArg(holder), ceiling, int64(lease), now.UnixNano()).Scan(&d.Acquired, &d.InUse)
	if err != nil {
		return driver.SlotDecision{}, wrapErr(ctx, err, "slot of %s under %q", holder, key)
	}
	return d, nil
}

// Release frees holder's slot of key, in one statement.
func (s *Store) Release(ctx context.Context, key string, holder driver.RequestID) error {
	if err := ctx.Err(); err != nil {
		return wrapErr(ctx, err, "slot of %s under %q", holder, key)
	}
	if _, err := s.db.Exec(ctx, `UPDATE tollgate_slots SET holder = NULL, expires = 0 WHERE key = $1 AND holder = $2`, key, uuidArg(holder)); err != nil {
		return wrapErr(ctx, err, "slot of %s under %q", holder, key)
	}
	return nil
}

// Renew extends holder's live lease to now+lease, in one statement.
func (s *Store) Renew(ctx context.Context, key string, holder driver.RequestID, lease time.Duration, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return wrapErr(ctx, err, "slot of %s under %q", holder, key)
	}
	tag, err := s.db.Exec(ctx, `UPDATE tollgate_slots SET expires = $3 WHERE key = $1 AND holder = $2 AND expires > $4`,
		key, uuidArg(holder), now.Add(lease).UnixNano(), now.UnixNano())
	if err != nil {
		return wrapErr(ctx, err, "slot of %s under %q", holder, key)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: slot of %s under %q: %w", holder, key, store.ErrNotFound)
	}
	return nil
}

// InUse returns the number of live slots of key at now, in one statement.
func (s *Store) InUse(ctx context.Context, key string, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, wrapErr(ctx, err, "slots of %q", key)
	}
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM tollgate_slots WHERE key = $1 AND holder IS NOT NULL AND expires > $2`, key, now.UnixNano()).Scan(&n); err != nil {
		return 0, wrapErr(ctx, err, "slots of %q", key)
	}
	return n, nil
}
