-- Tollgate schema, version 4: reservations that expire.
--
-- A reservation is a pending transfer with a deadline. tollgate_charge records it open,
-- with the instant it expires; it ends exactly once, settled or voided:
--
--   charge --> open (a row of tollgate_reservations) --+-- settle: 'settle' or 'refund'
--                                                      |
--                                                      +-- expires <= now: 'expire'
--                                                          (tollgate_void): the credits
--                                                          and the call counts come back
--
-- Whoever deletes the reservation's row closes it: a settlement deletes it before it
-- records its entry, a void deletes the rows it locked (FOR UPDATE SKIP LOCKED, so
-- voids and settlements never wait for each other), and the unique index over
-- 'settle', 'refund' and 'expire' entries is the second guard. A settlement that finds
-- the reservation voided answers status 5 and changes nothing. Every operation on an
-- account (admission, reservation, settlement, adjustment, balance) first voids the
-- account's expired reservations; tollgate_sweep voids those of any accounts.
--
-- Credits are bounded: a positive adjustment never takes an account's remaining plus
-- used credits past 2^53-1 (billing.MaxCredits); the used credits include every open
-- reservation, so no refund can pass it either.
--
-- An account's balance row keeps next_expiry, at most the earliest expiry of its open
-- reservations (NULL when it has none it knows of): an operation looks for expired
-- reservations only when next_expiry says one is due, so the hot path reads no more
-- than the balance row it reads anyway. A reservation lowers it (or sets it when NULL)
-- before it takes its credits; a void sets it to the earliest expiry left; settlements
-- leave it, low, until the next void. A reservation made while a void of its account
-- recomputes next_expiry may be missed by that recomputation: it is then voided by the
-- sweep, or by the account's next void.
--
-- Lock order: rate row, slot lock, balance row, shards (all of an account's, in shard
-- order, before any reservation row is voided), reservation rows. A void never waits
-- for a reservation row. (This version's settlement took its reservation's row before
-- the shard it credits, and could deadlock with a void: version 5 corrects it and
-- states the order in full.)

ALTER TABLE tollgate_balances ADD COLUMN next_expiry bigint;

CREATE TABLE tollgate_reservations (
    account_id text   NOT NULL,
    request_id uuid   NOT NULL,
    expires    bigint NOT NULL,  -- Unix nanoseconds: voided if still open at this instant
    CONSTRAINT tollgate_reservations_pkey PRIMARY KEY (account_id, request_id)
);

-- Reservations that an earlier version left open expire at once: their settlements
-- were lost with the instances that held them, and the first sweep gives them back.
INSERT INTO tollgate_reservations (account_id, request_id, expires)
SELECT r.account_id, r.request_id, 0
  FROM tollgate_ledger r
 WHERE r.kind = 'reserve'
   AND NOT EXISTS (SELECT 1 FROM tollgate_ledger s
                    WHERE s.account_id = r.account_id AND s.request_id = r.request_id
                      AND s.kind IN ('settle', 'refund'));

UPDATE tollgate_balances b SET next_expiry = 0
 WHERE EXISTS (SELECT 1 FROM tollgate_reservations x WHERE x.account_id = b.account_id);

ALTER TABLE tollgate_ledger DROP CONSTRAINT tollgate_ledger_kind;
ALTER TABLE tollgate_ledger ADD CONSTRAINT tollgate_ledger_kind
    CHECK (kind IN ('open', 'renewal', 'reserve', 'settle', 'refund', 'adjust', 'void', 'expire'));
DROP INDEX tollgate_ledger_settlement;
CREATE UNIQUE INDEX tollgate_ledger_settlement ON tollgate_ledger (account_id, request_id)
    WHERE kind IN ('settle', 'refund', 'expire');

DROP FUNCTION tollgate_close_batch(text, uuid[], boolean[], text[], bigint[], text[], int[], timestamptz[], timestamptz[], bigint[]);
DROP FUNCTION tollgate_admit_batch(text, uuid[], bigint[], text[], text[], bytea[], bigint[], bigint[], int[], bigint[], text[], bigint[], text[], int[], timestamptz[], timestamptz[], bigint[]);
DROP FUNCTION tollgate_close(text, uuid, boolean, text, bigint, text[], timestamptz, timestamptz, bigint);
DROP FUNCTION tollgate_admit(text, uuid, bigint, text, text, bytea, bigint, bigint, int, bigint, text, bigint, text[], timestamptz, timestamptz, bigint);
DROP FUNCTION tollgate_balance(text, timestamptz, timestamptz, bigint);
DROP FUNCTION tollgate_adjust(text, uuid, bigint, text, timestamptz, timestamptz, bigint);
DROP FUNCTION tollgate_settle(text, uuid, bigint, text[], timestamptz, timestamptz, bigint);
DROP FUNCTION tollgate_reserve(text, uuid, bigint, text[], timestamptz, timestamptz, bigint);
DROP FUNCTION tollgate_charge(text, int, uuid, bigint, text[]);

-- tollgate_credit gives back p_amount credits and uncounts p_apis on the shard that
-- counted the reservation whose 'reserve' entry is e (shard 0 once the shards were
-- rebuilt), unless a renewal has reset the balance since; it reports whether it did.
CREATE FUNCTION tollgate_credit(e tollgate_ledger, p_amount bigint, p_apis text[]) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tollgate_balance_shards s
       SET balance = s.balance + p_amount, used = s.used - p_amount,
           usage = tollgate_usage_add(s.usage, p_apis, -1)
     WHERE s.account_id = e.account_id
       AND s.shard = CASE WHEN s.generation = e.generation THEN e.shard ELSE 0 END
       AND s.period_start = e.period_start;
    RETURN FOUND;
END
$$;

-- tollgate_usage_less takes p_calls (an object of API ids and counts) from the call
-- counts p_usage, never going below zero: as that many calls of tollgate_usage_add with
-- a delta of -1 would.
CREATE FUNCTION tollgate_usage_less(p_usage jsonb, p_calls jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    u jsonb := p_usage;
    k text;
    v text;
BEGIN
    FOR k, v IN SELECT * FROM jsonb_each_text(p_calls) LOOP
        u := jsonb_set(u, ARRAY[k], to_jsonb(greatest(coalesce((u ->> k)::bigint, 0) - v::bigint, 0)));
    END LOOP;
    RETURN u;
END
$$;

-- tollgate_void voids up to p_limit of the account's reservations that are open past
-- their expiry at p_now, and returns how many it voided: each gets an 'expire' entry,
-- and its credits and call counts come back, unless the balance was renewed since (the
-- entry's amount is what was given back). It takes the account's shards first, then the
-- rows no one else holds: a row that a settlement is deleting is left to it. It works
-- on all the rows at once: one DELETE, one UPDATE per shard that counted them, one
-- INSERT of the entries.
CREATE FUNCTION tollgate_void(p_account text, p_now bigint, p_limit int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
    m tollgate_balances;
BEGIN
    IF p_limit <= 0 THEN
        RETURN 0;
    END IF;
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
    WITH gone AS (
        DELETE FROM tollgate_reservations d
         WHERE d.account_id = p_account AND d.request_id IN (
               SELECT x.request_id FROM tollgate_reservations x
                WHERE x.account_id = p_account AND x.expires <= p_now
                ORDER BY x.expires LIMIT p_limit
                  FOR UPDATE SKIP LOCKED)
        RETURNING d.request_id),
    e AS (
        -- The reservations' entries, each given back on the shard that counted it
        -- (shard 0 once the shards were rebuilt) if the period has not changed since.
        SELECT l.request_id, -l.amount AS amount, l.apis, l.period_start,
               coalesce(l.period_start = m.period_start, false) AS credited,
               CASE WHEN l.generation = m.generation THEN l.shard ELSE 0 END AS target
          FROM gone g
          JOIN tollgate_ledger l ON l.account_id = p_account AND l.request_id = g.request_id AND l.kind = 'reserve'
         WHERE NOT EXISTS (SELECT 1 FROM tollgate_ledger c
                            WHERE c.account_id = p_account AND c.request_id = g.request_id
                              AND c.kind IN ('settle', 'refund', 'expire'))),
    per_shard AS (
        SELECT e.target, sum(e.amount) AS total,
               (SELECT coalesce(jsonb_object_agg(a.api, a.calls), '{}')
                  FROM (SELECT api, count(*) AS calls FROM e e2, unnest(e2.apis) AS api
                         WHERE e2.credited AND e2.target = e.target GROUP BY api) a) AS calls
          FROM e WHERE e.credited GROUP BY e.target),
    credit AS (
        UPDATE tollgate_balance_shards s
           SET balance = s.balance + p.total, used = s.used - p.total, usage = tollgate_usage_less(s.usage, p.calls)
          FROM per_shard p
         WHERE s.account_id = p_account AND s.shard = p.target AND s.period_start = m.period_start)
    INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, apis)
    SELECT p_account, e.request_id, 'expire', CASE WHEN e.credited THEN e.amount ELSE 0 END, e.period_start,
           CASE WHEN e.credited THEN e.apis END
      FROM e;
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE tollgate_balances b
       SET next_expiry = (SELECT min(x.expires) FROM tollgate_reservations x WHERE x.account_id = p_account)
     WHERE b.account_id = p_account;
    RETURN n;
END
$$;

-- tollgate_void_due voids the account's expired reservations if m, its balance row,
-- says one is due at p_now, and returns next_expiry as it is then.
CREATE FUNCTION tollgate_void_due(m tollgate_balances, p_now bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    next_at bigint := m.next_expiry;
BEGIN
    IF next_at IS NOT NULL AND next_at <= p_now THEN
        PERFORM tollgate_void(m.account_id, p_now, 64);
        SELECT b.next_expiry INTO next_at FROM tollgate_balances b WHERE b.account_id = m.account_id;
    END IF;
    RETURN next_at;
END
$$;

-- tollgate_expect lowers the account's next_expiry to p_expires, for a reservation about
-- to be made, when next_at (as the caller read it) is NULL or later.
CREATE FUNCTION tollgate_expect(p_account text, next_at bigint, p_expires bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF next_at IS NULL OR p_expires < next_at THEN
        UPDATE tollgate_balances b SET next_expiry = least(coalesce(b.next_expiry, p_expires), p_expires)
         WHERE b.account_id = p_account;
    END IF;
END
$$;

-- tollgate_sweep voids up to p_limit expired reservations of any accounts (at most 32
-- accounts per call, taken in the order of their ids, so that concurrent sweeps lock
-- shards in one order), and returns how many it voided.
CREATE FUNCTION tollgate_sweep(p_now bigint, p_limit int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int := 0;
    a text;
BEGIN
    FOR a IN SELECT DISTINCT x.account_id FROM tollgate_reservations x
              WHERE x.expires <= p_now ORDER BY 1 LIMIT 32 LOOP
        n := n + tollgate_void(a, p_now, p_limit - n);
        EXIT WHEN n >= p_limit;
    END LOOP;
    RETURN n;
END
$$;

-- tollgate_charge makes a reservation open until p_expires: it takes the credits
-- (tollgate_take), records the 'reserve' entry and the open reservation. If a concurrent
-- reservation with the same request id recorded its entry first, it gives the credits
-- back and reports a replay. Outcomes: 0 reserved, 1 insufficient, 2 replayed.
CREATE FUNCTION tollgate_charge(p_account text, p_shards int, p_request uuid, p_amount bigint, p_apis text[],
    p_expires bigint,
    OUT o_outcome int, OUT o_remaining bigint, OUT o_used bigint, OUT o_period_start timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    tk record;
BEGIN
    tk := tollgate_take(p_account, p_shards, p_amount, p_amount, p_apis);
    o_remaining := tk.o_remaining;
    o_used := tk.o_used;
    o_period_start := tk.o_period_start;
    IF NOT tk.o_ok THEN
        o_outcome := 1;
        RETURN;
    END IF;
    INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, shard, generation, apis)
    VALUES (p_account, p_request, 'reserve', -p_amount, tk.o_period_start, tk.o_shard, tk.o_generation, p_apis)
    ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING;
    IF FOUND THEN
        INSERT INTO tollgate_reservations (account_id, request_id, expires) VALUES (p_account, p_request, p_expires);
        o_outcome := 0;
        RETURN;
    END IF;
    UPDATE tollgate_balance_shards s
       SET balance = s.balance + p_amount, used = s.used - p_amount, usage = tollgate_usage_add(s.usage, p_apis, -1)
     WHERE s.account_id = p_account AND s.shard = tk.o_shard;
    o_remaining := o_remaining + p_amount;
    o_used := o_used - p_amount;
    o_outcome := 2;
END
$$;

-- tollgate_reserve is billing.Ledger.Reserve. Status: 0 reserved (or a replay, which
-- changes nothing), 1 no balance, 4 insufficient credits.
CREATE FUNCTION tollgate_reserve(p_account text, p_request uuid, p_amount bigint, p_apis text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint, p_expires bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    c record;
    next_at bigint;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    next_at := tollgate_void_due(m, p_now);
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    IF EXISTS (SELECT 1 FROM tollgate_ledger e
                WHERE e.account_id = p_account AND e.request_id = p_request AND e.kind IN ('reserve', 'adjust', 'void')) THEN
        SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
        RETURN;
    END IF;
    PERFORM tollgate_expect(p_account, next_at, p_expires);
    c := tollgate_charge(p_account, m.shards, p_request, p_amount, p_apis, p_expires);
    o_remaining := c.o_remaining;
    o_used := c.o_used;
    IF c.o_outcome = 1 THEN
        o_status := 4;
    ELSIF c.o_period_start <> m.period_start THEN
        -- A renewal committed between the period check and the reservation.
        SELECT b.allowance, b.period_start, b.period_end INTO o_allowance, o_period_start, o_period_end
          FROM tollgate_balances b WHERE b.account_id = p_account;
    END IF;
END
$$;

-- tollgate_settle is billing.Ledger.Settle. Status: 0 settled (or settled before), 1 no
-- balance, 2 no such reservation (the request id is then voided, so that a reservation
-- still on its way takes nothing), 3 refund outside 0..reserved (o_reserved says the
-- reserved amount), 5 the reservation was voided at its expiry (nothing changes). A
-- refund of a reservation made in an earlier period is not credited and its APIs are
-- not uncounted. The reservation's row is deleted before the settlement is recorded,
-- so a settlement and a void of one reservation never both happen.
CREATE FUNCTION tollgate_settle(p_account text, p_request uuid, p_refund bigint, p_uncount text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz, OUT o_reserved bigint)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    e tollgate_ledger;
    known boolean;
    closed text;
    credit boolean;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    PERFORM tollgate_void_due(m, p_now);
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    SELECT * INTO e FROM tollgate_ledger l
     WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind = 'reserve';
    known := FOUND;
    IF NOT known THEN
        -- Close the request id, so that a reservation still on its way takes nothing;
        -- if one committed meanwhile (the insert then conflicts), settle it.
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start)
        VALUES (p_account, p_request, 'void', 0, m.period_start)
        ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING;
        IF NOT FOUND THEN
            SELECT * INTO e FROM tollgate_ledger l
             WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind = 'reserve';
            known := FOUND;
        END IF;
    END IF;
    IF NOT known THEN
        o_status := 2;
    ELSIF p_refund < 0 OR p_refund > -e.amount THEN
        o_status := 3;
        o_reserved := -e.amount;
    ELSE
        DELETE FROM tollgate_reservations r WHERE r.account_id = p_account AND r.request_id = p_request;
        IF NOT FOUND THEN
            SELECT l.kind INTO closed FROM tollgate_ledger l
             WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind IN ('settle', 'refund', 'expire');
            IF closed = 'expire' THEN
                o_status := 5;
            END IF;
        END IF;
        IF closed IS NULL THEN
            credit := e.period_start = m.period_start AND (p_refund > 0 OR coalesce(cardinality(p_uncount), 0) > 0);
            INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, apis)
            VALUES (p_account, p_request, CASE WHEN credit AND p_refund > 0 THEN 'refund' ELSE 'settle' END,
                    CASE WHEN credit THEN p_refund ELSE 0 END, m.period_start, CASE WHEN credit THEN p_uncount END)
            ON CONFLICT (account_id, request_id) WHERE kind IN ('settle', 'refund', 'expire') DO NOTHING;
            IF FOUND AND credit AND NOT tollgate_credit(e, p_refund, p_uncount) THEN
                UPDATE tollgate_ledger l SET kind = 'settle', amount = 0, apis = NULL
                 WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind IN ('settle', 'refund');
            END IF;
        END IF;
    END IF;
    SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
END
$$;

-- tollgate_adjust is billing.Ledger.Adjust. Status: 0 adjusted (or a replay), 1 no
-- balance, 4 insufficient credits, 6 the remaining plus used credits would pass
-- p_max. A grant holds every shard while it checks the total, so that concurrent
-- grants cannot pass the bound together.
CREATE FUNCTION tollgate_adjust(p_account text, p_request uuid, p_amount bigint, p_reason text,
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint, p_max bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    tk record;
    target int;
    ps timestamptz;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    PERFORM tollgate_void_due(m, p_now);
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    IF NOT EXISTS (SELECT 1 FROM tollgate_ledger e
                    WHERE e.account_id = p_account AND e.request_id = p_request AND e.kind IN ('reserve', 'adjust', 'void')) THEN
        IF p_amount >= 0 THEN
            PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
            SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
            IF p_amount > p_max - o_remaining - o_used THEN
                o_status := 6;
                RETURN;
            END IF;
            target := floor(random() * m.shards)::int;
            UPDATE tollgate_balance_shards s SET balance = s.balance + p_amount
             WHERE s.account_id = p_account AND s.shard = target
            RETURNING s.period_start INTO ps;
            IF NOT FOUND THEN -- the shards were rebuilt meanwhile: shard 0 always exists
                target := 0;
                UPDATE tollgate_balance_shards s SET balance = s.balance + p_amount
                 WHERE s.account_id = p_account AND s.shard = 0
                RETURNING s.period_start INTO ps;
            END IF;
        ELSE
            tk := tollgate_take(p_account, m.shards, -p_amount, 0, NULL);
            IF NOT tk.o_ok THEN
                o_status := 4;
                o_remaining := tk.o_remaining;
                o_used := tk.o_used;
                RETURN;
            END IF;
            target := tk.o_shard;
            ps := tk.o_period_start;
        END IF;
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, reason)
        VALUES (p_account, p_request, 'adjust', p_amount, ps, p_reason)
        ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING;
        IF NOT FOUND THEN -- a concurrent replay recorded it first: undo
            UPDATE tollgate_balance_shards s SET balance = s.balance - p_amount
             WHERE s.account_id = p_account AND s.shard = target;
        END IF;
    END IF;
    SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
END
$$;

-- tollgate_balance is billing.Ledger.Balance. Status: 0 found, 1 no balance.
CREATE FUNCTION tollgate_balance(p_account text, p_start timestamptz, p_end timestamptz, p_allowance bigint,
    p_now bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    PERFORM tollgate_void_due(m, p_now);
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
END
$$;

-- tollgate_admit performs the parts of billing.Step in one transaction, in the order key,
-- rate, slot, credits. Every part is checked before anything is written, and credits
-- (the only check that writes) come last, so a denied step changes nothing (beyond
-- voiding the account's expired reservations, which any operation may do). Locks are
-- taken in the order rate row, slot lock, balance row, shards, reservation rows, as
-- every other function does, so that admissions never deadlock with each other or with
-- settlements. A NULL group of parameters is a part the step does not have:
--   key:     p_key_account (NULL: no key check), p_key_id, p_key_hash
--   rate:    p_rate_e (NULL: no rate limit), p_rate_window, for the key p_account
--   slot:    p_slot_ceiling (NULL: no slot), p_slot_lease, held by p_request under p_account
--   credits: p_credit_account (NULL: no reservation), p_amount, p_apis, the period and
--            allowance, and p_expires, when the reservation is voided if still open
-- o_denied is a billing.Denial. o_status is 1 when the credit account has no balance (an
-- error, nothing changed). A step whose request already has a reservation (or a void, or,
-- without credits, a live lease) is a replay: it is admitted again and takes nothing;
-- the holder's live lease is renewed. o_rate_tat is the tat the rate decision was made on
-- (for a replay, the current one).
CREATE FUNCTION tollgate_admit(
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
        replay := EXISTS (SELECT 1 FROM tollgate_leases l
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
            UPDATE tollgate_leases l SET expires = p_now + p_slot_lease
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

-- tollgate_close settles p_request's reservation (when p_settle_account is not NULL) and
-- frees its slot of p_account (when p_release), in one transaction. The slot is freed
-- last (after any shard lock, as admissions take them) and even if the settlement
-- reports an error status (see tollgate_settle).
CREATE FUNCTION tollgate_close(p_account text, p_request uuid, p_release boolean,
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
        DELETE FROM tollgate_leases l WHERE l.key = p_account AND l.holder = p_request;
    END IF;
END
$$;

-- Batches, as in version 1 (see there), with the reservations' expiries and the
-- closings' instants.

CREATE FUNCTION tollgate_admit_batch(
    p_account text, p_request uuid[], p_now bigint[],
    p_key_account text[], p_key_id text[], p_key_hash bytea[],
    p_rate_e bigint[], p_rate_window bigint[],
    p_slot_ceiling int[], p_slot_lease bigint[],
    p_credit_account text[], p_amount bigint[], p_apis text[], p_api_counts int[],
    p_start timestamptz[], p_end timestamptz[], p_allowance bigint[], p_expires bigint[])
RETURNS TABLE (o_denied int, o_status int, o_key_state int, o_rate_tat bigint,
    o_slot_acquired boolean, o_slot_in_use int,
    o_remaining bigint, o_used bigint, o_allowance bigint,
    o_period_start timestamptz, o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    off int := 0;
    a record;
    last int;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_rate_e) x WHERE x IS NOT NULL) THEN
        PERFORM tollgate_rate_lock(p_account);
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_slot_ceiling) x WHERE x IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock(1953261427, hashtext(p_account));
    END IF;
    SELECT i INTO last FROM generate_subscripts(p_credit_account, 1) AS i
     WHERE p_credit_account[i] IS NOT NULL ORDER BY p_start[i] DESC LIMIT 1;
    IF last IS NOT NULL THEN
        PERFORM tollgate_renew(p_credit_account[last], p_start[last], p_end[last], p_allowance[last]);
        -- The balance row (voids and next_expiry take it), then the shards.
        PERFORM 1 FROM tollgate_balances b WHERE b.account_id = p_credit_account[last] FOR UPDATE;
        PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_credit_account[last] ORDER BY s.shard FOR UPDATE;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(p_request), 0) LOOP
        a := tollgate_admit(p_account, p_request[i], p_now[i],
            p_key_account[i], p_key_id[i], p_key_hash[i],
            p_rate_e[i], p_rate_window[i],
            p_slot_ceiling[i], p_slot_lease[i],
            p_credit_account[i], p_amount[i], p_apis[off + 1 : off + p_api_counts[i]],
            p_start[i], p_end[i], p_allowance[i], p_expires[i]);
        off := off + p_api_counts[i];
        o_denied := a.o_denied;
        o_status := a.o_status;
        o_key_state := a.o_key_state;
        o_rate_tat := a.o_rate_tat;
        o_slot_acquired := a.o_slot_acquired;
        o_slot_in_use := a.o_slot_in_use;
        o_remaining := a.o_remaining;
        o_used := a.o_used;
        o_allowance := a.o_allowance;
        o_period_start := a.o_period_start;
        o_period_end := a.o_period_end;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE FUNCTION tollgate_close_batch(
    p_account text, p_request uuid[], p_release boolean[],
    p_settle_account text[], p_refund bigint[], p_uncount text[], p_uncount_counts int[],
    p_start timestamptz[], p_end timestamptz[], p_allowance bigint[], p_now bigint[])
RETURNS TABLE (o_status int, o_remaining bigint, o_used bigint, o_allowance bigint,
    o_period_start timestamptz, o_period_end timestamptz, o_reserved bigint)
LANGUAGE plpgsql AS $$
DECLARE
    off int := 0;
    c record;
    last int;
BEGIN
    SELECT i INTO last FROM generate_subscripts(p_settle_account, 1) AS i
     WHERE p_settle_account[i] IS NOT NULL ORDER BY p_start[i] DESC LIMIT 1;
    IF last IS NOT NULL THEN
        PERFORM tollgate_renew(p_settle_account[last], p_start[last], p_end[last], p_allowance[last]);
        -- Settlements that give credits back, and voids, lock shards: take them all
        -- now, in order.
        IF EXISTS (SELECT 1 FROM generate_subscripts(p_request, 1) AS i
                    WHERE p_settle_account[i] IS NOT NULL AND (p_refund[i] > 0 OR p_uncount_counts[i] > 0))
           OR EXISTS (SELECT 1 FROM tollgate_balances b
                       WHERE b.account_id = p_settle_account[last] AND b.next_expiry <= (SELECT max(t) FROM unnest(p_now) t)) THEN
            PERFORM 1 FROM tollgate_balances b WHERE b.account_id = p_settle_account[last] FOR UPDATE;
            PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_settle_account[last] ORDER BY s.shard FOR UPDATE;
        END IF;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(p_request), 0) LOOP
        c := tollgate_close(p_account, p_request[i], p_release[i],
            p_settle_account[i], p_refund[i], p_uncount[off + 1 : off + p_uncount_counts[i]],
            p_start[i], p_end[i], p_allowance[i], p_now[i]);
        off := off + p_uncount_counts[i];
        o_status := c.o_status;
        o_remaining := c.o_remaining;
        o_used := c.o_used;
        o_allowance := c.o_allowance;
        o_period_start := c.o_period_start;
        o_period_end := c.o_period_end;
        o_reserved := c.o_reserved;
        RETURN NEXT;
    END LOOP;
END
$$;
