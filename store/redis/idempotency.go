package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/store"
)

// IdempotencyStore keeps the records of batches sent with an idempotency key
// ([idempotency.Store]) in the Redis of a [Store], under its prefix: each record is one
// key, "<prefix>:idem:<id in hexadecimal>". It is a value of its own, made by
// [Store.Idempotency], so that the Store's own Claim and Remove can be its journal's.
// It is safe for concurrent use.
type IdempotencyStore struct{ s *Store }

// Interface guard.
var _ idempotency.Store = (*IdempotencyStore)(nil)

// Idempotency returns the store of the idempotency records, on the Store's client and
// under its prefix.
func (s *Store) Idempotency() *IdempotencyStore { return &IdempotencyStore{s: s} }

// Ping checks that Redis answers (see [Store.Ping]).
func (is *IdempotencyStore) Ping(ctx context.Context) error { return is.s.Ping(ctx) }

// idemKey is the key of an idempotency record: "<prefix>:idem:<id in hexadecimal>".
func (is *IdempotencyStore) idemKey(id idempotency.ID) string {
	return is.s.prefix + ":idem:" + id.String()
}

// idemTime writes an instant for the idempotency scripts: Unix nanoseconds in 20
// digits, which compare as strings as the instants do.
func idemTime(what string, t time.Time) (string, error) {
	ns := t.UnixNano()
	if ns < 0 {
		return "", fmt.Errorf("redis: idempotency record: the %s %s is before 1970: %w", what, t, store.ErrInvalid)
	}
	return fmt.Sprintf("%020d", ns), nil
}

// Claim claims the record of c.ID in one script (see [idempotency.Store]). The record
// lives in Redis until a second after its expiry, on the caller's clock; a claim
// judges expiry and leases on the caller's clock too.
func (is *IdempotencyStore) Claim(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	if err := ctx.Err(); err != nil {
		return idempotency.Record{}, err
	}
	var args [3]string
	for i, t := range []struct {
		what string
		t    time.Time
	}{{"now", c.Now}, {"lease", c.Lease}, {"expiry", c.Expires}} {
		var err error
		if args[i], err = idemTime(t.what, t.t); err != nil {
			return idempotency.Record{}, err
		}
	}
	ttl := ms(c.Expires.Sub(c.Now)) + 1000
	reply, err := is.s.write(ctx, idemClaimScript, []string{is.idemKey(c.ID)},
		c.Fingerprint[:], c.Run[:], c.Token[:], args[0], args[1], args[2], ttl)
	if err != nil {
		return idempotency.Record{}, fail(ctx, err, "idempotency record %s", c.ID)
	}
	r := asSlice(reply)
	if len(r) == 0 {
		return idempotency.Record{}, errReply("idempotency record "+c.ID.String(), reply)
	}
	rec := idempotency.Record{State: idempotency.State(asInt(r[0]))}
	if len(r) > 1 {
		copy(rec.Run[:], asString(r[1]))
	}
	if len(r) > 2 {
		rec.Answer = []byte(asString(r[2]))
	}
	return rec, nil
}

// Preview returns what a claim c would get, in one read that changes nothing (see
// [idempotency.Store]).
func (is *IdempotencyStore) Preview(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	if err := ctx.Err(); err != nil {
		return idempotency.Record{}, err
	}
	if _, err := idemTime("now", c.Now); err != nil {
		return idempotency.Record{}, err
	}
	v, err := is.s.c.HMGet(ctx, is.idemKey(c.ID), "f", "r", "l", "e", "d", "s", "a").Result()
	if err != nil {
		return idempotency.Record{}, fail(ctx, err, "idempotency record %s", c.ID)
	}
	if v[0] == nil {
		return (*idempotency.Stored)(nil).Preview(c), nil
	}
	field := func(i int) string { s, _ := v[i].(string); return s }
	var st idempotency.Stored
	copy(st.Fingerprint[:], field(0))
	copy(st.Run[:], field(1))
	st.Lease, _ = strconv.ParseInt(field(2), 10, 64)
	st.Expires, _ = strconv.ParseInt(field(3), 10, 64)
	st.Done, st.Settling = field(4) == "1", field(5) == "1"
	if st.Done {
		st.Answer = []byte(field(6))
	}
	return st.Preview(c), nil
}

// MarkSettling marks a record its token holds, and that has not expired at now, as
// settling, in one script.
func (is *IdempotencyStore) MarkSettling(ctx context.Context, id idempotency.ID, token idempotency.Token, now time.Time) error {
	at, err := idemTime("time of the mark", now)
	if err != nil {
		return err
	}
	held, err := is.closeIdem(ctx, id, token, "settling", []byte(at))
	if err == nil && !held {
		err = idempotency.ErrNotHeld
	}
	return err
}

// Complete keeps the answer of a record its token holds, in one script.
func (is *IdempotencyStore) Complete(ctx context.Context, id idempotency.ID, token idempotency.Token, answer []byte) error {
	_, err := is.closeIdem(ctx, id, token, "complete", answer)
	return err
}

// Abandon forgets a record its token holds, unless it is marked settling, in one
// script.
func (is *IdempotencyStore) Abandon(ctx context.Context, id idempotency.ID, token idempotency.Token) error {
	_, err := is.closeIdem(ctx, id, token, "abandon", nil)
	return err
}

// closeIdem runs idem_close.lua on the record of id in mode op, and reports whether
// token held the record.
func (is *IdempotencyStore) closeIdem(ctx context.Context, id idempotency.ID, token idempotency.Token, op string, answer []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	reply, err := is.s.write(ctx, idemCloseScript, []string{is.idemKey(id)}, token[:], op, answer)
	if err != nil {
		return false, fail(ctx, err, "idempotency record %s", id)
	}
	return asInt(reply) == 1, nil
}
