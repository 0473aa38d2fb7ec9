-- Tollgate schema, version 12: concurrency slots are rows that are reused, never
-- deleted, so that counting a key's slots costs the same at the millionth call as at the
-- first.
--
-- Until version 10 a lease was a row of tollgate_leases inserted at admission and
-- deleted at settlement. Every admission counts its key's live leases, and the index
-- entries of deleted rows stay until a vacuum removes them, so the count read one more
-- dead entry for every call the key had made since the last vacuum: on a busy account,
-- tens of thousands within a minute (autovacuum wakes once a minute at best, and may be
-- off), and the admission's cost grew all the while (1.8 ms for one count after 13,000
-- calls). Now a key has one row per slot, (key, slot), and a call takes a free row and
-- gives it back by updating it in place: the updates change no indexed column, so they
-- are HOT updates that add no index entry, and the old versions are pruned from the
-- page without a vacuum (the table leaves half of each page free for them). A key has
-- as many rows as it ever had calls at once, at most its ceiling; a slot whose lease
-- ended (its holder crashed) is free again, as before.
--
-- The lock order (version 5) is unchanged, with the slot rows in the place of the lease
-- rows: last.

CREATE TABLE tollgate_slots (
    key     text   NOT NULL,
    slot    int    NOT NULL,  -- 0, 1, ... per key
    holder  uuid,             -- NULL: free
    expires bigint NOT NULL,  -- Unix nanoseconds: the lease is live while expires > now
    CONSTRAINT tollgate_slots_pkey PRIMARY KEY (key, slot)
) WITH (fillfactor = 50);

INSERT INTO tollgate_slots (key, slot, holder, expires)
SELECT l.key, (row_number() OVER (PARTITION BY l.key ORDER BY l.holder) - 1)::int, l.holder, l.expires
  FROM tollgate_leases l;

DROP TABLE tollgate_leases;

-- tollgate_slot_count returns the live leases of a key at p_now, and whether p_holder has
-- one.
CREATE OR REPLACE FUNCTION tollgate_slot_count(p_key text, p_holder uuid, p_now bigint, OUT o_in_use int, OUT o_held boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT count(*) FILTER (WHERE l.holder IS NOT NULL AND l.expires > p_now)::int,
           coalesce(bool_or(l.holder = p_holder AND l.expires > p_now), false)
      INTO o_in_use, o_held
      FROM tollgate_slots l WHERE l.key = p_key;
END
$$;

-- tollgate_slot_grant gives p_holder a slot of the key until p_expires: the slot it holds
-- already, else a free one (never held, released, or whose lease has ended) that no
-- other transaction is releasing or renewing at the moment, else a new row. The caller
-- holds the key's advisory lock, so no other grant of the key runs meanwhile.
CREATE OR REPLACE FUNCTION tollgate_slot_grant(p_key text, p_holder uuid, p_expires bigint, p_now bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    UPDATE tollgate_slots l SET holder = p_holder, expires = p_expires
     WHERE l.ctid = (SELECT x.ctid FROM tollgate_slots x
                      WHERE x.key = p_key AND (x.holder IS NULL OR x.holder = p_holder OR x.expires <= p_now)
                      ORDER BY x.holder = p_holder DESC NULLS LAST, x.slot
                      LIMIT 1 FOR UPDATE SKIP LOCKED);
    IF NOT FOUND THEN
        SELECT coalesce(max(x.slot) + 1, 0) INTO n FROM tollgate_slots x WHERE x.key = p_key;
        INSERT INTO tollgate_slots (key, slot, holder, expires) VALUES (p_key, n, p_holder, p_expires);
    END IF;
END
$$;

-- tollgate_admit as in version 4, on the slot rows.
CREATE OR REPLACE FUNCTION tollgate_admit(
    p_account text, p_request uuid, p_now bigint,
    p_key_account text, p_key_id text, p_key_hash bytea,
    p_rate_e bigint, p_rate_window bigint,
    p_slot_ceiling int, p_slot_lease bigint,
    p_credit_account text, p_amount bigint, p_apis text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_expires bigint,
    OUT o_denied int, OUT o_status int, OUT o_key_state int, OUT o_rate_tat bigint,
    OUT o_slot_acquired boolean, OUT o_slot_in_use int,
    OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    replay boolean := false;
    t bigint;
    sc record;
    m tollgate_balances;
    c record;
    next_at bigint;
BEGIN
    o_denied := 0;
    o_status := 0;

    -- Key: the key with this id still has this hash and is not revoked, in the step's
    -- account (a check naming another account is unknown).
    IF p_key_account IS NOT NULL THEN
        o_key_state := CASE WHEN p_key_account = p_account
                            THEN tollgate_key_state(p_key_account, p_key_id, p_key_hash) ELSE 1 END;
        IF o_key_state <> 0 THEN
            o_denied := 1;
            RETURN;
        END IF;
    END IF;

    IF p_credit_account IS NOT NULL THEN
        replay := EXISTS (SELECT 1 FROM tollgate_ledger e
                           WHERE e.account_id = p_credit_account AND e.request_id = p_request
                             AND e.kind IN ('reserve', 'adjust', 'void'));
    ELSIF p_slot_ceiling IS NOT NULL THEN
        replay := EXISTS (SELECT 1 FROM tollgate_slots l
                           WHERE l.key = p_account AND l.holder = p_request AND l.expires > p_now);
    END IF;

    IF NOT replay THEN
        -- Rate: refused at once if the committed tat refuses; else decided under the row lock.
        IF p_rate_e IS NOT NULL THEN
            SELECT r.tat INTO t FROM tollgate_rate_limits r WHERE r.key = p_account;
            IF NOT FOUND OR greatest(t, p_now) + p_rate_e - p_now <= p_rate_window THEN
                t := tollgate_rate_lock(p_account);
            END IF;
            o_rate_tat := t;
            IF greatest(t, p_now) + p_rate_e - p_now > p_rate_window THEN
                o_denied := 2;
                RETURN;
            END IF;
        END IF;

        -- Slot: refused at once if the key is full; else counted under the advisory lock.
        IF p_slot_ceiling IS NOT NULL THEN
            sc := tollgate_slot_count(p_account, p_request, p_now);
            IF sc.o_held OR sc.o_in_use < p_slot_ceiling THEN
                sc := tollgate_slot_lock(p_account, p_request, p_now);
            END IF;
            o_slot_in_use := sc.o_in_use;
            o_slot_acquired := false;
            IF NOT sc.o_held AND sc.o_in_use >= p_slot_ceiling THEN
                o_denied := 3;
                RETURN;
            END IF;
        END IF;
    END IF;

    IF p_credit_account IS NOT NULL THEN
        m := tollgate_renew(p_credit_account, p_start, p_end, p_allowance);
        IF m.account_id IS NULL THEN
            o_status := 1;
            RETURN;
        END IF;
        next_at := tollgate_void_due(m, p_now);
        o_allowance := m.allowance;
        o_period_start := m.period_start;
        o_period_end := m.period_end;
        IF NOT replay THEN
            -- Credits: the reservation, the last check and the first write.
            PERFORM tollgate_expect(p_credit_account, next_at, p_expires);
            c := tollgate_charge(p_credit_account, m.shards, p_request, p_amount, p_apis, p_expires);
            o_remaining := c.o_remaining;
            o_used := c.o_used;
            IF c.o_outcome = 1 THEN
                o_denied := 4;
                RETURN;
            END IF;
            IF c.o_period_start <> m.period_start THEN
                -- A renewal committed between the period check and the reservation.
                SELECT b.allowance, b.period_start, b.period_end INTO o_allowance, o_period_start, o_period_end
                  FROM tollgate_balances b WHERE b.account_id = p_credit_account;
            END IF;
            replay := c.o_outcome = 2;
        END IF;
    END IF;

    IF replay THEN
        IF p_rate_e IS NOT NULL THEN
            SELECT coalesce((SELECT r.tat FROM tollgate_rate_limits r WHERE r.key = p_account), 0) INTO o_rate_tat;
        END IF;
        IF p_slot_ceiling IS NOT NULL THEN
            UPDATE tollgate_slots l SET expires = p_now + p_slot_lease
             WHERE l.key = p_account AND l.holder = p_request AND l.expires > p_now;
            o_slot_acquired := FOUND;
            SELECT sc2.o_in_use INTO o_slot_in_use FROM tollgate_slot_count(p_account, p_request, p_now) sc2;
        END IF;
        IF p_credit_account IS NOT NULL THEN
            SELECT t2.o_remaining, t2.o_used INTO o_remaining, o_used FROM tollgate_sums(p_credit_account) t2;
        END IF;
        RETURN;
    END IF;

    -- Every part passed: record the rate event and the lease.
    IF p_rate_e IS NOT NULL THEN
        UPDATE tollgate_rate_limits r SET tat = greatest(t, p_now) + p_rate_e WHERE r.key = p_account;
    END IF;
    IF p_slot_ceiling IS NOT NULL THEN
        PERFORM tollgate_slot_grant(p_account, p_request, p_now + p_slot_lease, p_now);
        o_slot_acquired := true;
        o_slot_in_use := sc.o_in_use + CASE WHEN sc.o_held THEN 0 ELSE 1 END;
    END IF;
END
$$;

-- tollgate_close as in version 4, freeing the slot row.
CREATE OR REPLACE FUNCTION tollgate_close(p_account text, p_request uuid, p_release boolean,
    p_settle_account text, p_refund bigint, p_uncount text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz, OUT o_reserved bigint)
LANGUAGE plpgsql AS $$
BEGIN
    o_status := 0;
    IF p_settle_account IS NOT NULL THEN
        SELECT * INTO o_status, o_remaining, o_used, o_allowance, o_period_start, o_period_end, o_reserved
          FROM tollgate_settle(p_settle_account, p_request, p_refund, p_uncount, p_start, p_end, p_allowance, p_now);
    END IF;
    IF p_release THEN
        UPDATE tollgate_slots l SET holder = NULL, expires = 0 WHERE l.key = p_account AND l.holder = p_request;
    END IF;
END
$$;
