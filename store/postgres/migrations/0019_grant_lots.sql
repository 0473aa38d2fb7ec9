-- Tollgate schema, version 19: a balance in two parts, the period's allowance and the
-- grants (billing/driver.Part).
--
-- The shards (tollgate_balance_shards.balance) now hold what is left of the period's
-- allowance, which a renewal resets. Grants are lots in tollgate_grant_lots, one row per
-- account and expiry (Unix nanoseconds; 0 for a lot that never lapses): they carry over
-- from period to period until they are spent or lapse. An account's remaining credits
-- are its shards' plus its lots'.
--
-- Calls spend the allowance first, then the lots, the one that lapses first first (0
-- last). A reservation records what it took from the lots in its 'reserve' entry (lots:
-- [[expires, credits], ...] in the order taken; granted: their sum); a refund, or a void,
-- gives back in the reverse order: to the lots, unless they have lapsed, then to the
-- allowance, unless the period has been renewed since. So the charge kept is from the
-- allowance first.
--
-- Every operation given a Now first drops the lots lapsed at it (tollgate_lapse), when
-- the balance row's next_lapse, the earliest expiry among the account's lot rows, says
-- one has; and it reads the lots only when the balance row's has_lots says there are
-- some: the hot path of an account without grants reads no more than before. A lot's
-- row stays, at 0, when it is spent, until it lapses, so that a refund finds it and
-- next_lapse stays exact; a lot whose row is gone has lapsed, and what a refund would
-- give back to it is lost.
--
-- Lock order, as version 5 states it, with the lots between the shards and the
-- reservation rows: whoever changes a lot (a grant, a reservation that reaches the
-- grants, a refund or void that gives back to them, a lapse, a renewal that reads
-- them) first holds every shard of the account, in shard order; so lot rows are never
-- waited for by a holder of a reservation row. Whoever adds or drops a lot row (a
-- grant, a lapse) holds the balance row before, to keep next_lapse.
--
-- Existing balances stay exact: each account keeps its remaining credits; what the
-- allowance does not explain, max(0, remaining - max(0, allowance - used)), becomes a
-- lot that never lapses.

CREATE TABLE tollgate_grant_lots (
    account_id text   NOT NULL,
    expires    bigint NOT NULL,  -- Unix nanoseconds from which what is left is gone; 0 never
    credits    bigint NOT NULL,
    CONSTRAINT tollgate_grant_lots_pkey PRIMARY KEY (account_id, expires),
    CONSTRAINT tollgate_grant_lots_nonnegative CHECK (credits >= 0)
);

ALTER TABLE tollgate_balances ADD COLUMN next_lapse bigint; -- the earliest expiry (> 0) of a lot row; NULL: none
ALTER TABLE tollgate_balances ADD COLUMN has_lots boolean NOT NULL DEFAULT false; -- whether the account has lot rows
ALTER TABLE tollgate_ledger ADD COLUMN part text;      -- 'adjust': 'grants' or 'allowance'
ALTER TABLE tollgate_ledger ADD COLUMN lots jsonb;     -- 'reserve': [[expires, credits], ...] taken from lots;
                                                       -- 'adjust' of a grant: [[expires, amount]]
ALTER TABLE tollgate_ledger ADD COLUMN granted bigint; -- 'reserve': the credits taken from lots

WITH s AS (
    SELECT x.account_id, sum(x.balance)::bigint AS r, sum(x.used)::bigint AS u, count(*)::int AS n
      FROM tollgate_balance_shards x GROUP BY x.account_id),
extra AS (
    SELECT s.account_id, s.n, s.r, greatest(0, s.r - greatest(0, b.allowance - s.u)) AS g
      FROM s JOIN tollgate_balances b ON b.account_id = s.account_id),
moved AS (
    UPDATE tollgate_balance_shards x
       SET balance = (e.r - e.g) / e.n + CASE WHEN x.shard < (e.r - e.g) % e.n THEN 1 ELSE 0 END
      FROM extra e
     WHERE x.account_id = e.account_id AND e.g > 0)
INSERT INTO tollgate_grant_lots (account_id, expires, credits)
SELECT e.account_id, 0, e.g FROM extra e WHERE e.g > 0;
UPDATE tollgate_balances b SET has_lots = true
 WHERE EXISTS (SELECT 1 FROM tollgate_grant_lots g WHERE g.account_id = b.account_id);

-- The functions whose results or arguments change are dropped and made anew.
DROP FUNCTION tollgate_close_batch(text, uuid[], boolean[], text[], bigint[], text[], int[], timestamptz[], timestamptz[], bigint[], bigint[]);
DROP FUNCTION tollgate_close_set(text, uuid[], boolean[], text[], bigint[], int[]);
DROP FUNCTION tollgate_admit_batch(text, uuid[], bigint[], text[], text[], bytea[], bigint[], bigint[], int[], bigint[], text[], bigint[], text[], int[], timestamptz[], timestamptz[], bigint[], bigint[]);
DROP FUNCTION tollgate_admit_set(text, uuid[], bigint[], text[], text[], bytea[], bigint[], bigint[], int[], bigint[], text[], bigint[], text[], int[], bigint[]);
DROP FUNCTION tollgate_close(text, uuid, boolean, text, bigint, text[], timestamptz, timestamptz, bigint, bigint);
DROP FUNCTION tollgate_admit(text, uuid, bigint, text, text, bytea, bigint, bigint, int, bigint, text, bigint, text[], timestamptz, timestamptz, bigint, bigint);
DROP FUNCTION tollgate_balance(text, timestamptz, timestamptz, bigint, bigint);
DROP FUNCTION tollgate_adjust(text, uuid, bigint, text, timestamptz, timestamptz, bigint, bigint, bigint);
DROP FUNCTION tollgate_settle(text, uuid, bigint, text[], timestamptz, timestamptz, bigint, bigint);
DROP FUNCTION tollgate_reserve(text, uuid, bigint, text[], timestamptz, timestamptz, bigint, bigint, bigint);
DROP FUNCTION tollgate_charge(text, int, uuid, bigint, text[], bigint);
DROP FUNCTION tollgate_take(text, int, bigint, bigint, text[]);
DROP FUNCTION tollgate_credit(tollgate_ledger, bigint, text[]);

-- tollgate_lots returns what the account's lots hold, and the earliest expiry among
-- those that hold credits and lapse (NULL for none), with their credits.
CREATE FUNCTION tollgate_lots(p_account text, OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT coalesce(sum(g.credits), 0)::bigint, min(g.expires) FILTER (WHERE g.expires > 0 AND g.credits > 0)
      INTO o_granted, o_lapse
      FROM tollgate_grant_lots g WHERE g.account_id = p_account;
    IF o_lapse IS NOT NULL THEN
        SELECT g.credits INTO o_lapsing FROM tollgate_grant_lots g WHERE g.account_id = p_account AND g.expires = o_lapse;
    END IF;
END
$$;

-- tollgate_totals returns an account's figures as of one snapshot: the remaining
-- credits (the shards' and the lots'), the used ones, and the lots as tollgate_lots
-- reports them; with p_lots false (the account has no lots), the shards' alone.
CREATE FUNCTION tollgate_totals(p_account text, p_lots boolean, OUT o_remaining bigint, OUT o_used bigint,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT p_lots THEN
        SELECT t.o_remaining, t.o_used, 0 INTO o_remaining, o_used, o_granted FROM tollgate_sums(p_account) t;
        RETURN;
    END IF;
    SELECT s.r + g.granted, s.u, g.granted, g.lapse, g.lapsing
      INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing
      FROM (SELECT coalesce(sum(x.balance), 0)::bigint AS r, coalesce(sum(x.used), 0)::bigint AS u
              FROM tollgate_balance_shards x WHERE x.account_id = p_account) s,
           (SELECT coalesce(sum(y.credits), 0)::bigint AS granted,
                   min(y.expires) FILTER (WHERE y.expires > 0 AND y.credits > 0) AS lapse,
                   (array_agg(y.credits ORDER BY y.expires) FILTER (WHERE y.expires > 0 AND y.credits > 0))[1] AS lapsing
              FROM tollgate_grant_lots y WHERE y.account_id = p_account) g;
END
$$;

-- tollgate_lapse drops the account's lots lapsed at p_now when m, its balance row,
-- says one has (a NULL p_now drops nothing), holding the balance row and every shard
-- of the account: the caller holds no shard, or the balance row and all of them.
CREATE FUNCTION tollgate_lapse(m tollgate_balances, p_now bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_now IS NULL OR m.next_lapse IS NULL OR m.next_lapse > p_now THEN
        RETURN;
    END IF;
    PERFORM 1 FROM tollgate_balances b WHERE b.account_id = m.account_id FOR UPDATE;
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = m.account_id ORDER BY s.shard FOR UPDATE;
    DELETE FROM tollgate_grant_lots g WHERE g.account_id = m.account_id AND g.expires > 0 AND g.expires <= p_now;
    UPDATE tollgate_balances b
       SET next_lapse = (SELECT min(g.expires) FROM tollgate_grant_lots g WHERE g.account_id = m.account_id AND g.expires > 0),
           has_lots = EXISTS (SELECT 1 FROM tollgate_grant_lots g WHERE g.account_id = m.account_id)
     WHERE b.account_id = m.account_id;
END
$$;

-- tollgate_give_lots gives back up to p_refund credits to the lots a reservation took
-- from (p_lots, [[expires, credits], ...] in the order taken), the last first, to each
-- what was taken from it, unless it has lapsed (its row is gone, or it lapses by p_now):
-- that part is lost. It gives p_room at most in all (what is above is lost too), and
-- returns what is left of p_refund, for the allowance. The caller holds every shard.
CREATE FUNCTION tollgate_give_lots(p_account text, p_lots jsonb, p_refund bigint, p_now bigint, p_room bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    rest bigint := p_refund;
    room bigint := greatest(p_room, 0);
    x bigint;
    c bigint;
BEGIN
    IF p_lots IS NULL THEN
        RETURN rest;
    END IF;
    FOR i IN REVERSE jsonb_array_length(p_lots) - 1 .. 0 LOOP
        EXIT WHEN rest <= 0;
        x := (p_lots -> i ->> 0)::bigint;
        c := least(rest, (p_lots -> i ->> 1)::bigint);
        rest := rest - c;
        IF x = 0 OR p_now IS NULL OR x > p_now THEN
            c := least(c, room);
            UPDATE tollgate_grant_lots g SET credits = g.credits + c WHERE g.account_id = p_account AND g.expires = x;
            IF FOUND THEN
                room := room - c;
            END IF;
        END IF;
    END LOOP;
    RETURN rest;
END
$$;

-- tollgate_renew as in version 1, resetting the allowance part only: the shards get the
-- allowance, less what the lots hold past 2^53-1 minus it, and the lots are left.
CREATE OR REPLACE FUNCTION tollgate_renew(p_account text, p_start timestamptz, p_end timestamptz, p_allowance bigint)
RETURNS tollgate_balances
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    a bigint;
BEGIN
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
    IF NOT FOUND OR p_start <= m.period_start THEN
        RETURN m;
    END IF;
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
    IF p_start <= m.period_start THEN
        RETURN m; -- renewed by another caller meanwhile
    END IF;
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
    SELECT least(p_allowance, 9007199254740991 - coalesce(sum(g.credits), 0))::bigint INTO a
      FROM tollgate_grant_lots g WHERE g.account_id = p_account;
    UPDATE tollgate_balance_shards s
       SET balance = a / m.shards + CASE WHEN s.shard < a % m.shards THEN 1 ELSE 0 END,
           used = 0, usage = '{}', period_start = p_start
     WHERE s.account_id = p_account;
    UPDATE tollgate_balances b
       SET allowance = p_allowance, period_start = p_start, period_end = p_end
     WHERE b.account_id = p_account
    RETURNING * INTO m;
    INSERT INTO tollgate_ledger (account_id, kind, amount, period_start)
    VALUES (p_account, 'renewal', a, p_start);
    RETURN m;
END
$$;

-- tollgate_open as in version 1: up to the allowance the opening balance is the
-- period's, spread over the shards; the rest is a lot that never lapses.
CREATE OR REPLACE FUNCTION tollgate_open(p_account text, p_balance bigint, p_allowance bigint,
    p_start timestamptz, p_end timestamptz, p_shards int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    a bigint := least(p_balance, greatest(p_allowance, 0));
BEGIN
    INSERT INTO tollgate_balances (account_id, allowance, period_start, period_end, shards, has_lots)
    VALUES (p_account, p_allowance, p_start, p_end, p_shards, p_balance > a);
    INSERT INTO tollgate_balance_shards (account_id, shard, generation, period_start, balance, used)
    SELECT p_account, g, 0, p_start, a / p_shards + CASE WHEN g < a % p_shards THEN 1 ELSE 0 END, 0
      FROM generate_series(0, p_shards - 1) AS g;
    IF p_balance > a THEN
        INSERT INTO tollgate_grant_lots (account_id, expires, credits) VALUES (p_account, 0, p_balance - a);
    END IF;
    INSERT INTO tollgate_ledger (account_id, kind, amount, period_start)
    VALUES (p_account, 'open', p_balance, p_start);
END
$$;

-- tollgate_take as in version 1, taking from the allowance first: when the shards
-- together do not cover the amount, it takes all of them and the rest from the lots,
-- in the order calls spend them (o_lots says what it took from each, o_granted in all).
-- o_remaining is the allowance part afterwards (or, short, as it was).
CREATE FUNCTION tollgate_take(p_account text, p_shards int, p_amount bigint, p_used bigint, p_apis text[],
    OUT o_ok boolean, OUT o_shard int, OUT o_generation int, OUT o_period_start timestamptz,
    OUT o_remaining bigint, OUT o_used bigint, OUT o_granted bigint, OUT o_lots jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    r int := 0;
    n int;
    total bigint;
    spent bigint;
    rest bigint;
    granted bigint;
    need bigint;
    x bigint;
    have bigint;
    c bigint;
BEGIN
    o_ok := false;
    o_granted := 0;
    IF p_shards > 1 THEN
        r := floor(random() * p_shards)::int;
        -- As in version 1: each attempt is a subtransaction, so that no stray row lock
        -- is kept out of shard order.
        BEGIN
            UPDATE tollgate_balance_shards s
               SET balance = s.balance - p_amount, used = s.used + p_used, usage = tollgate_usage_add(s.usage, p_apis, 1)
             WHERE s.account_id = p_account AND s.shard = (
                   SELECT x.shard FROM tollgate_balance_shards x
                    WHERE x.account_id = p_account AND x.balance >= p_amount
                    ORDER BY (x.shard + p_shards - r) % p_shards
                    LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING s.shard, s.generation, s.period_start INTO o_shard, o_generation, o_period_start;
            IF NOT FOUND THEN
                RAISE SQLSTATE 'TG001';
            END IF;
        EXCEPTION WHEN SQLSTATE 'TG001' THEN
            o_shard := NULL;
        END;
        IF o_shard IS NULL THEN
            BEGIN
                UPDATE tollgate_balance_shards s
                   SET balance = s.balance - p_amount, used = s.used + p_used, usage = tollgate_usage_add(s.usage, p_apis, 1)
                 WHERE s.account_id = p_account AND s.balance >= p_amount AND s.shard = (
                       SELECT x.shard FROM tollgate_balance_shards x
                        WHERE x.account_id = p_account AND x.balance >= p_amount
                        ORDER BY (x.shard + p_shards - r) % p_shards
                        LIMIT 1)
                RETURNING s.shard, s.generation, s.period_start INTO o_shard, o_generation, o_period_start;
                IF NOT FOUND THEN
                    RAISE SQLSTATE 'TG001';
                END IF;
            EXCEPTION WHEN SQLSTATE 'TG001' THEN
                o_shard := NULL;
            END;
        END IF;
        IF o_shard IS NOT NULL THEN
            o_ok := true;
            SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
            RETURN;
        END IF;
    ELSE
        UPDATE tollgate_balance_shards s
           SET balance = s.balance - p_amount, used = s.used + p_used, usage = tollgate_usage_add(s.usage, p_apis, 1)
         WHERE s.account_id = p_account AND s.shard = 0 AND s.balance >= p_amount
        RETURNING s.shard, s.generation, s.period_start, s.balance, s.used
             INTO o_shard, o_generation, o_period_start, o_remaining, o_used;
        IF FOUND THEN
            o_ok := true;
            RETURN;
        END IF;
    END IF;

    -- No single shard covers the amount. A short total, with the grants, refuses at once.
    SELECT t.o_remaining, t.o_used INTO total, spent FROM tollgate_sums(p_account) t;
    SELECT coalesce(sum(g.credits), 0)::bigint INTO granted FROM tollgate_grant_lots g WHERE g.account_id = p_account;
    IF total + granted < p_amount THEN
        o_remaining := total;
        o_used := spent;
        RETURN;
    END IF;
    -- It may cover it: lock every shard, decide on the exact total, and pool the credits.
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
    SELECT count(*)::int, coalesce(sum(s.balance), 0)::bigint, coalesce(sum(s.used), 0)::bigint
      INTO n, total, spent
      FROM tollgate_balance_shards s WHERE s.account_id = p_account;
    IF n = 0 THEN
        o_remaining := total;
        o_used := spent;
        RETURN;
    END IF;
    rest := total - p_amount;
    IF rest < 0 THEN
        -- The allowance is short: all of it, and the rest from the lots.
        PERFORM 1 FROM tollgate_grant_lots g WHERE g.account_id = p_account ORDER BY g.expires FOR UPDATE;
        SELECT coalesce(sum(g.credits), 0)::bigint INTO granted FROM tollgate_grant_lots g WHERE g.account_id = p_account;
        IF total + granted < p_amount THEN
            o_remaining := total;
            o_used := spent;
            RETURN;
        END IF;
        need := -rest;
        o_granted := need;
        o_lots := '[]';
        FOR x, have IN SELECT g.expires, g.credits FROM tollgate_grant_lots g
                        WHERE g.account_id = p_account AND g.credits > 0
                        ORDER BY g.expires = 0, g.expires LOOP
            c := least(have, need);
            UPDATE tollgate_grant_lots g SET credits = g.credits - c WHERE g.account_id = p_account AND g.expires = x;
            o_lots := o_lots || jsonb_build_array(jsonb_build_array(x, c));
            need := need - c;
            EXIT WHEN need = 0;
        END LOOP;
        rest := 0;
    END IF;
    r := r % n;
    UPDATE tollgate_balance_shards s
       SET balance = rest / n + CASE WHEN s.shard < rest % n THEN 1 ELSE 0 END,
           used = s.used + CASE WHEN s.shard = r THEN p_used ELSE 0 END,
           usage = CASE WHEN s.shard = r THEN tollgate_usage_add(s.usage, p_apis, 1) ELSE s.usage END
     WHERE s.account_id = p_account;
    SELECT s.generation, s.period_start INTO o_generation, o_period_start
      FROM tollgate_balance_shards s WHERE s.account_id = p_account AND s.shard = r;
    o_ok := true;
    o_shard := r;
    o_remaining := rest;
    o_used := spent + p_used;
END
$$;

-- tollgate_charge as in version 4, recording in the 'reserve' entry what the
-- reservation took from the lots. o_remaining is the allowance part.
CREATE FUNCTION tollgate_charge(p_account text, p_shards int, p_request uuid, p_amount bigint, p_apis text[],
    p_expires bigint,
    OUT o_outcome int, OUT o_remaining bigint, OUT o_used bigint, OUT o_period_start timestamptz, OUT o_granted bigint)
LANGUAGE plpgsql AS $$
DECLARE
    tk record;
BEGIN
    tk := tollgate_take(p_account, p_shards, p_amount, p_amount, p_apis);
    o_remaining := tk.o_remaining;
    o_used := tk.o_used;
    o_period_start := tk.o_period_start;
    o_granted := tk.o_granted;
    IF NOT tk.o_ok THEN
        o_outcome := 1;
        RETURN;
    END IF;
    INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, shard, generation, apis, lots, granted)
    VALUES (p_account, p_request, 'reserve', -p_amount, tk.o_period_start, tk.o_shard, tk.o_generation, p_apis,
            tk.o_lots, nullif(tk.o_granted, 0))
    ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING;
    IF FOUND THEN
        INSERT INTO tollgate_reservations (account_id, request_id, expires) VALUES (p_account, p_request, p_expires);
        o_outcome := 0;
        RETURN;
    END IF;
    UPDATE tollgate_balance_shards s
       SET balance = s.balance + p_amount - tk.o_granted, used = s.used - p_amount,
           usage = tollgate_usage_add(s.usage, p_apis, -1)
     WHERE s.account_id = p_account AND s.shard = tk.o_shard;
    PERFORM tollgate_give_lots(p_account, tk.o_lots, tk.o_granted, NULL, tk.o_granted);
    o_remaining := o_remaining + p_amount - tk.o_granted;
    o_used := o_used - p_amount;
    o_granted := 0;
    o_outcome := 2;
END
$$;

-- tollgate_credit gives back p_amount credits to the allowance part, takes p_used off
-- the used credits and uncounts p_apis, on the shard that counted the reservation
-- whose 'reserve' entry is e (shard 0 once the shards were rebuilt), unless a renewal
-- has reset the balance since; it reports whether it did.
CREATE FUNCTION tollgate_credit(e tollgate_ledger, p_amount bigint, p_used bigint, p_apis text[]) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tollgate_balance_shards s
       SET balance = s.balance + p_amount, used = s.used - p_used,
           usage = tollgate_usage_add(s.usage, p_apis, -1)
     WHERE s.account_id = e.account_id
       AND s.shard = CASE WHEN s.generation = e.generation THEN e.shard ELSE 0 END
       AND s.period_start = e.period_start;
    RETURN FOUND;
END
$$;

-- tollgate_room returns how many credits the account can take before its remaining
-- plus used credits reach 2^53-1.
CREATE FUNCTION tollgate_room(p_account text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    rem bigint;
    spent bigint;
BEGIN
    SELECT t.o_remaining, t.o_used INTO rem, spent FROM tollgate_sums(p_account) t;
    RETURN 9007199254740991 - rem - spent
         - (SELECT coalesce(sum(g.credits), 0) FROM tollgate_grant_lots g WHERE g.account_id = p_account);
END
$$;

-- tollgate_void as in version 5, giving back to the lots first: what each reservation
-- took from live lots goes back to them (after a renewal too, as long as the bound
-- holds), the rest to the allowance of the same period.
CREATE OR REPLACE FUNCTION tollgate_void(p_account text, p_now bigint, p_limit int, p_request uuid DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
    m tollgate_balances;
    ids uuid[];
    v record;
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
                  AND (p_request IS NULL OR x.request_id = p_request)
                ORDER BY x.expires LIMIT p_limit
                  FOR UPDATE SKIP LOCKED)
        RETURNING d.request_id),
    e AS (
        SELECT l.request_id, -l.amount AS amount, coalesce(l.granted, 0) AS granted, l.apis, l.period_start,
               coalesce(l.period_start = m.period_start, false) AS credited,
               CASE WHEN l.generation = m.generation THEN l.shard ELSE 0 END AS target
          FROM gone g
          JOIN tollgate_ledger l ON l.account_id = p_account AND l.request_id = g.request_id AND l.kind = 'reserve'
         WHERE NOT EXISTS (SELECT 1 FROM tollgate_ledger c
                            WHERE c.account_id = p_account AND c.request_id = g.request_id
                              AND c.kind IN ('settle', 'refund', 'expire'))),
    per_shard AS (
        SELECT e.target, sum(e.amount - e.granted) AS back, sum(e.amount) AS total,
               (SELECT coalesce(jsonb_object_agg(a.api, a.calls), '{}')
                  FROM (SELECT api, count(*) AS calls FROM e e2, unnest(e2.apis) AS api
                         WHERE e2.credited AND e2.target = e.target GROUP BY api) a) AS calls
          FROM e WHERE e.credited GROUP BY e.target),
    credit AS (
        UPDATE tollgate_balance_shards s
           SET balance = s.balance + p.back, used = s.used - p.total, usage = tollgate_usage_less(s.usage, p.calls)
          FROM per_shard p
         WHERE s.account_id = p_account AND s.shard = p.target AND s.period_start = m.period_start),
    closed AS (
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, apis)
        SELECT p_account, e.request_id, 'expire', CASE WHEN e.credited THEN e.amount ELSE e.granted END, e.period_start,
               CASE WHEN e.credited THEN e.apis END
          FROM e
        RETURNING request_id)
    SELECT count(*)::int, array_agg(closed.request_id) INTO n, ids FROM closed;
    FOR v IN SELECT l.lots, l.granted, l.period_start FROM tollgate_ledger l
              WHERE l.account_id = p_account AND l.kind = 'reserve' AND l.request_id = ANY (ids) AND l.lots IS NOT NULL LOOP
        PERFORM tollgate_give_lots(p_account, v.lots, v.granted, p_now,
            CASE WHEN v.period_start = m.period_start THEN v.granted ELSE tollgate_room(p_account) END);
    END LOOP;
    UPDATE tollgate_balances b
       SET next_expiry = (SELECT min(x.expires) FROM tollgate_reservations x WHERE x.account_id = p_account)
     WHERE b.account_id = p_account;
    RETURN n;
END
$$;

-- tollgate_reserve is billing.Ledger.Reserve, as in version 4, after dropping the lapsed
-- lots. o_remaining counts both parts; o_granted, o_lapse and o_lapsing describe the
-- lots; o_charge_allowance and o_charge_grants say what a reservation took (NULL for a
-- replay or a refusal).
CREATE FUNCTION tollgate_reserve(p_account text, p_request uuid, p_amount bigint, p_apis text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint, p_expires bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint,
    OUT o_charge_allowance bigint, OUT o_charge_grants bigint)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    c record;
    charged boolean := false;
    next_at bigint;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    next_at := tollgate_void_due(m, p_now);
    PERFORM tollgate_lapse(m, p_now);
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    IF NOT EXISTS (SELECT 1 FROM tollgate_ledger e
                    WHERE e.account_id = p_account AND e.request_id = p_request AND e.kind IN ('reserve', 'adjust', 'void')) THEN
        PERFORM tollgate_expect(p_account, next_at, p_expires);
        c := tollgate_charge(p_account, m.shards, p_request, p_amount, p_apis, p_expires);
        charged := true;
        IF c.o_outcome = 1 THEN
            o_status := 4;
        ELSE
            IF c.o_outcome = 0 THEN
                o_charge_allowance := p_amount - c.o_granted;
                o_charge_grants := c.o_granted;
            END IF;
            IF c.o_period_start <> m.period_start THEN
                -- A renewal committed between the period check and the reservation.
                SELECT b.allowance, b.period_start, b.period_end INTO o_allowance, o_period_start, o_period_end
                  FROM tollgate_balances b WHERE b.account_id = p_account;
            END IF;
        END IF;
    END IF;
    IF NOT charged THEN
        SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_account, m.has_lots);
    ELSIF m.has_lots OR c.o_granted > 0 THEN
        SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_account, true);
    ELSE
        o_remaining := c.o_remaining;
        o_used := c.o_used;
        o_granted := 0;
    END IF;
END
$$;

-- tollgate_settle is billing.Ledger.Settle, as in version 5, giving the refund back in
-- the reverse order of what the reservation took: to its live lots (holding every
-- shard), then to the allowance if the period has not been renewed since. The lapsed
-- lots are dropped first. o_charge_allowance and o_charge_grants divide the charge kept
-- (NULL unless this call closed the reservation).
CREATE FUNCTION tollgate_settle(p_account text, p_request uuid, p_refund bigint, p_uncount text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz, OUT o_reserved bigint,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint,
    OUT o_charge_allowance bigint, OUT o_charge_grants bigint)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    e tollgate_ledger;
    known boolean;
    closed text;
    credit boolean;
    voiding boolean;
    lots_back boolean;
    lapsing boolean;
    due_at bigint;
    rest bigint;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    SELECT * INTO e FROM tollgate_ledger l
     WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind = 'reserve';
    known := FOUND;
    IF NOT known OR p_refund < 0 OR p_refund > -e.amount THEN
        PERFORM tollgate_void_due(m, p_now);
        PERFORM tollgate_lapse(m, p_now);
    END IF;
    IF NOT known THEN
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
        SELECT r.expires INTO due_at FROM tollgate_reservations r
         WHERE r.account_id = p_account AND r.request_id = p_request;
        voiding := coalesce(m.next_expiry <= p_now OR due_at <= p_now, false);
        credit := e.period_start = m.period_start AND (p_refund > 0 OR coalesce(cardinality(p_uncount), 0) > 0);
        lots_back := p_refund > 0 AND coalesce(e.granted, 0) > 0;
        lapsing := coalesce(m.next_lapse <= p_now, false);
        IF voiding OR lapsing THEN
            PERFORM 1 FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
            PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
        ELSIF lots_back THEN
            PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
        ELSIF credit THEN
            PERFORM 1 FROM tollgate_balance_shards s
             WHERE s.account_id = p_account
               AND s.shard = CASE WHEN s.generation = e.generation THEN e.shard ELSE 0 END
               FOR UPDATE;
        END IF;
        IF lapsing THEN
            PERFORM tollgate_lapse(m, p_now);
        END IF;
        PERFORM 1 FROM tollgate_reservations r
         WHERE r.account_id = p_account AND r.request_id = p_request FOR UPDATE;
        IF voiding THEN
            PERFORM tollgate_void(p_account, p_now, 1, p_request);
            PERFORM tollgate_void(p_account, p_now, 64);
        END IF;
        DELETE FROM tollgate_reservations r WHERE r.account_id = p_account AND r.request_id = p_request;
        IF NOT FOUND THEN
            SELECT l.kind INTO closed FROM tollgate_ledger l
             WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind IN ('settle', 'refund', 'expire');
            IF closed = 'expire' THEN
                o_status := 5;
            END IF;
        END IF;
        IF closed IS NULL THEN
            INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, apis)
            VALUES (p_account, p_request, CASE WHEN (credit OR lots_back) AND p_refund > 0 THEN 'refund' ELSE 'settle' END,
                    CASE WHEN credit OR lots_back THEN p_refund ELSE 0 END, m.period_start, CASE WHEN credit THEN p_uncount END)
            ON CONFLICT (account_id, request_id) WHERE kind IN ('settle', 'refund', 'expire') DO NOTHING;
            IF FOUND THEN
                rest := p_refund;
                IF lots_back THEN
                    rest := tollgate_give_lots(p_account, e.lots, p_refund, p_now,
                        CASE WHEN e.period_start = m.period_start THEN p_refund ELSE tollgate_room(p_account) END);
                END IF;
                IF credit AND NOT tollgate_credit(e, rest, p_refund, p_uncount) AND NOT lots_back THEN
                    UPDATE tollgate_ledger l SET kind = 'settle', amount = 0, apis = NULL
                     WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind IN ('settle', 'refund');
                END IF;
                o_charge_allowance := least(-e.amount - coalesce(e.granted, 0), -e.amount - p_refund);
                o_charge_grants := -e.amount - p_refund - o_charge_allowance;
            END IF;
        END IF;
    END IF;
    SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing
      FROM tollgate_totals(p_account, m.has_lots OR coalesce(e.granted, 0) > 0);
END
$$;

-- tollgate_adjust is billing.Ledger.Adjust. p_part is 0 for the grants, 1 for the
-- allowance; p_expires is a grant's lot (0: never lapses). Status: 0 adjusted (or a
-- replay), 1 no balance, 4 insufficient credits, 6 the remaining plus used credits
-- would pass p_max, 7 a grant would start a lot past p_max_lots. It holds every shard
-- (and so the lots) while it decides.
CREATE FUNCTION tollgate_adjust(p_account text, p_request uuid, p_amount bigint, p_part int, p_expires bigint,
    p_reason text, p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint, p_max bigint,
    p_max_lots int,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    tk record;
    rem bigint;
    spent bigint;
    granted bigint;
    a bigint;
    n int;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    PERFORM tollgate_void_due(m, p_now);
    PERFORM tollgate_lapse(m, p_now);
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    PERFORM 1 FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
    IF NOT EXISTS (SELECT 1 FROM tollgate_ledger e
                    WHERE e.account_id = p_account AND e.request_id = p_request AND e.kind IN ('reserve', 'adjust', 'void')) THEN
        SELECT t.o_remaining, t.o_used INTO rem, spent FROM tollgate_sums(p_account) t;
        SELECT coalesce(sum(g.credits), 0)::bigint INTO granted FROM tollgate_grant_lots g WHERE g.account_id = p_account;
        IF p_amount > p_max - rem - spent - granted THEN
            o_status := 6;
        ELSIF p_part = 0 AND p_amount < 0 AND rem + granted < -p_amount THEN
            o_status := 4;
        ELSIF p_part = 0 AND p_amount > 0
              AND NOT EXISTS (SELECT 1 FROM tollgate_grant_lots g
                               WHERE g.account_id = p_account AND g.expires = p_expires AND g.credits > 0)
              AND (SELECT count(*) FROM tollgate_grant_lots g WHERE g.account_id = p_account AND g.credits > 0) >= p_max_lots THEN
            o_status := 7;
        ELSE
            INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, reason, part, lots)
            VALUES (p_account, p_request, 'adjust', p_amount, m.period_start, p_reason,
                    CASE WHEN p_part = 1 THEN 'allowance' ELSE 'grants' END,
                    CASE WHEN p_part = 0 AND p_amount > 0 THEN jsonb_build_array(jsonb_build_array(p_expires, p_amount)) END)
            ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING;
            IF FOUND THEN
                IF p_part = 1 THEN
                    a := rem + greatest(p_amount, -rem);
                    SELECT count(*)::int INTO n FROM tollgate_balance_shards s WHERE s.account_id = p_account;
                    UPDATE tollgate_balance_shards s
                       SET balance = a / n + CASE WHEN s.shard < a % n THEN 1 ELSE 0 END
                     WHERE s.account_id = p_account;
                ELSIF p_amount > 0 THEN
                    INSERT INTO tollgate_grant_lots AS g (account_id, expires, credits) VALUES (p_account, p_expires, p_amount)
                    ON CONFLICT (account_id, expires) DO UPDATE SET credits = g.credits + excluded.credits;
                    UPDATE tollgate_balances b
                       SET next_lapse = CASE WHEN p_expires > 0 THEN least(coalesce(b.next_lapse, p_expires), p_expires) ELSE b.next_lapse END,
                           has_lots = true
                     WHERE b.account_id = p_account;
                ELSIF p_amount < 0 THEN
                    tk := tollgate_take(p_account, m.shards, -p_amount, 0, NULL);
                    UPDATE tollgate_ledger l SET lots = tk.o_lots
                     WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind = 'adjust';
                END IF;
            END IF;
        END IF;
    END IF;
    SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_account, true);
END
$$;

-- tollgate_balance is billing.Ledger.Balance. Status: 0 found, 1 no balance.
CREATE FUNCTION tollgate_balance(p_account text, p_start timestamptz, p_end timestamptz, p_allowance bigint,
    p_now bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint)
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
    PERFORM tollgate_lapse(m, p_now);
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_account, m.has_lots);
END
$$;

-- tollgate_admit as in version 12, after dropping the lapsed lots, with the lots and the
-- charge in its result as tollgate_reserve reports them.
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
    OUT o_period_start timestamptz, OUT o_period_end timestamptz,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint,
    OUT o_charge_allowance bigint, OUT o_charge_grants bigint)
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
        PERFORM tollgate_lapse(m, p_now);
        o_allowance := m.allowance;
        o_period_start := m.period_start;
        o_period_end := m.period_end;
        IF NOT replay THEN
            PERFORM tollgate_expect(p_credit_account, next_at, p_expires);
            c := tollgate_charge(p_credit_account, m.shards, p_request, p_amount, p_apis, p_expires);
            IF m.has_lots OR c.o_granted > 0 THEN
                SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_credit_account, true);
            ELSE
                o_remaining := c.o_remaining;
                o_used := c.o_used;
                o_granted := 0;
            END IF;
            IF c.o_outcome = 1 THEN
                o_denied := 4;
                RETURN;
            END IF;
            IF c.o_outcome = 0 THEN
                o_charge_allowance := p_amount - c.o_granted;
                o_charge_grants := c.o_granted;
            END IF;
            IF c.o_period_start <> m.period_start THEN
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
            SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_credit_account, m.has_lots);
        END IF;
        RETURN;
    END IF;

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

-- tollgate_close as in version 12, with the result of tollgate_settle.
CREATE FUNCTION tollgate_close(p_account text, p_request uuid, p_release boolean,
    p_settle_account text, p_refund bigint, p_uncount text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz, OUT o_reserved bigint,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint,
    OUT o_charge_allowance bigint, OUT o_charge_grants bigint)
LANGUAGE plpgsql AS $$
BEGIN
    o_status := 0;
    IF p_settle_account IS NOT NULL THEN
        SELECT * INTO o_status, o_remaining, o_used, o_allowance, o_period_start, o_period_end, o_reserved,
                      o_granted, o_lapse, o_lapsing, o_charge_allowance, o_charge_grants
          FROM tollgate_settle(p_settle_account, p_request, p_refund, p_uncount, p_start, p_end, p_allowance, p_now);
    END IF;
    IF p_release THEN
        UPDATE tollgate_slots l SET holder = NULL, expires = 0 WHERE l.key = p_account AND l.holder = p_request;
    END IF;
END
$$;

-- The batches, as in version 15, with the lots and the charges in their results. A
-- batch is decided as a whole only when no step reaches the grants and no lot lapses
-- within its instants; a batch of closings takes the shards first when a lot lapses.

CREATE FUNCTION tollgate_admit_set(
    p_account text, p_request uuid[], p_now bigint[],
    p_key_account text[], p_key_id text[], p_key_hash bytea[],
    p_rate_e bigint[], p_rate_window bigint[],
    p_slot_ceiling int[], p_slot_lease bigint[],
    p_credit_account text[], p_amount bigint[], p_apis text[], p_api_counts int[],
    p_expires bigint[],
    OUT o_done boolean,
    OUT o_denied int[], OUT o_status int[], OUT o_key_state int[], OUT o_rate_tat bigint[],
    OUT o_slot_acquired boolean[], OUT o_slot_in_use int[],
    OUT o_remaining bigint[], OUT o_used bigint[], OUT o_allowance bigint[],
    OUT o_period_start timestamptz[], OUT o_period_end timestamptz[],
    OUT o_granted bigint[], OUT o_lapse bigint[], OUT o_lapsing bigint[],
    OUT o_charge_allowance bigint[], OUT o_charge_grants bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    n int := coalesce(cardinality(p_request), 0);
    off int[] := array_fill(0, ARRAY[n]);  -- p_apis of step i start after off[i]
    pos int := 0;
    lo bigint;                             -- the batch's earliest and latest instants
    hi bigint;
    rates boolean := false;
    slots boolean := false;
    credits boolean := false;
    m tollgate_balances;
    t bigint;                              -- the rate row's tat, as the steps move it
    tat0 bigint;
    in_use int;                            -- the key's live slots, as the steps take them
    ending boolean;
    remaining bigint;                      -- the shard's balance, as the steps take it
    spent bigint;
    gen int;
    ps timestamptz;
    ks int;
    k_id text;
    k_hash bytea;
    k_state int;
    k_known boolean := false;
    holders uuid[] := '{}';                -- the slots granted, in step order
    leases bigint[] := '{}';
    taken int[] := '{}';                   -- the steps that reserve, in step order
    total bigint := 0;
    counted text[] := '{}';                -- the APIs of the steps that reserve
    soonest bigint;                        -- the earliest expiry of the steps that reach credits
    asked int := 0;                        -- the steps with credits
    k int;
    lt record;                             -- the lots, which a step reaches only one by one
BEGIN
    o_done := false;
    IF n = 0 THEN
        RETURN;
    END IF;
    FOR i IN 1 .. n LOOP
        off[i] := pos;
        pos := pos + p_api_counts[i];
        lo := least(lo, p_now[i]);
        hi := greatest(hi, p_now[i]);
        rates := rates OR p_rate_e[i] IS NOT NULL;
        slots := slots OR p_slot_ceiling[i] IS NOT NULL;
        IF p_credit_account[i] IS NOT NULL THEN
            IF p_credit_account[i] <> p_account THEN
                RETURN;
            END IF;
            credits := true;
            asked := asked + 1;
        END IF;
    END LOOP;
    IF (SELECT count(DISTINCT r) FROM unnest(p_request) r) <> n THEN
        RETURN;
    END IF;
    IF credits THEN
        SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
        IF NOT FOUND OR m.shards <> 1 OR m.next_expiry <= hi THEN
            RETURN;
        END IF;
        SELECT s.balance, s.used, s.generation, s.period_start INTO remaining, spent, gen, ps
          FROM tollgate_balance_shards s WHERE s.account_id = p_account AND s.shard = 0;
        IF NOT FOUND OR ps <> m.period_start THEN
            RETURN;
        END IF;
        -- A lot that lapses within the batch's instants is dropped one step after the
        -- other.
        lt := tollgate_lots(p_account);
        IF m.next_lapse <= hi THEN
            RETURN;
        END IF;
    END IF;
    IF rates THEN
        SELECT r.tat INTO t FROM tollgate_rate_limits r WHERE r.key = p_account;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        tat0 := t;
    END IF;
    IF slots THEN
        -- A slot held by a request of the batch makes it a replay.
        SELECT count(*) FILTER (WHERE l.holder IS NOT NULL AND l.expires > lo)::int,
               coalesce(bool_or(l.holder IS NOT NULL AND l.expires > lo AND l.expires <= hi
                                OR l.holder = ANY (p_request)), false)
          INTO in_use, ending
          FROM tollgate_slots l WHERE l.key = p_account;
        IF ending THEN
            RETURN;
        END IF;
    END IF;

    -- Each step in order, as tollgate_admit would decide it after the ones before it.
    o_denied := array_fill(0, ARRAY[n]);
    o_status := array_fill(0, ARRAY[n]);
    o_key_state := array_fill(NULL::int, ARRAY[n]);
    o_rate_tat := array_fill(NULL::bigint, ARRAY[n]);
    o_slot_acquired := array_fill(NULL::boolean, ARRAY[n]);
    o_slot_in_use := array_fill(NULL::int, ARRAY[n]);
    o_remaining := array_fill(NULL::bigint, ARRAY[n]);
    o_used := array_fill(NULL::bigint, ARRAY[n]);
    o_allowance := array_fill(NULL::bigint, ARRAY[n]);
    o_period_start := array_fill(NULL::timestamptz, ARRAY[n]);
    o_period_end := array_fill(NULL::timestamptz, ARRAY[n]);
    o_granted := array_fill(NULL::bigint, ARRAY[n]);
    o_lapse := array_fill(NULL::bigint, ARRAY[n]);
    o_lapsing := array_fill(NULL::bigint, ARRAY[n]);
    o_charge_allowance := array_fill(NULL::bigint, ARRAY[n]);
    o_charge_grants := array_fill(NULL::bigint, ARRAY[n]);
    FOR i IN 1 .. n LOOP
        IF p_key_account[i] IS NOT NULL THEN
            IF p_key_account[i] <> p_account THEN
                ks := 1;
            ELSIF k_known AND p_key_id[i] IS NOT DISTINCT FROM k_id AND p_key_hash[i] IS NOT DISTINCT FROM k_hash THEN
                ks := k_state;
            ELSE
                ks := tollgate_key_state(p_key_account[i], p_key_id[i], p_key_hash[i]);
                k_id := p_key_id[i];
                k_hash := p_key_hash[i];
                k_state := ks;
                k_known := true;
            END IF;
            o_key_state[i] := ks;
            IF ks <> 0 THEN
                o_denied[i] := 1;
                CONTINUE;
            END IF;
        END IF;
        IF p_rate_e[i] IS NOT NULL THEN
            o_rate_tat[i] := t;
            IF greatest(t, p_now[i]) + p_rate_e[i] - p_now[i] > p_rate_window[i] THEN
                o_denied[i] := 2;
                CONTINUE;
            END IF;
        END IF;
        IF p_slot_ceiling[i] IS NOT NULL THEN
            o_slot_in_use[i] := in_use;
            o_slot_acquired[i] := false;
            IF in_use >= p_slot_ceiling[i] THEN
                o_denied[i] := 3;
                CONTINUE;
            END IF;
        END IF;
        IF p_credit_account[i] IS NOT NULL THEN
            o_allowance[i] := m.allowance;
            o_period_start[i] := m.period_start;
            o_period_end[i] := m.period_end;
            soonest := least(soonest, p_expires[i]);
            o_granted[i] := lt.o_granted;
            o_lapse[i] := lt.o_lapse;
            o_lapsing[i] := lt.o_lapsing;
            IF remaining < p_amount[i] THEN
                IF lt.o_granted > 0 THEN
                    RETURN; -- the step reaches the grants: one step after the other
                END IF;
                o_remaining[i] := remaining;
                o_used[i] := spent;
                o_denied[i] := 4;
                CONTINUE;
            END IF;
            remaining := remaining - p_amount[i];
            spent := spent + p_amount[i];
            o_remaining[i] := remaining + lt.o_granted;
            o_used[i] := spent;
            o_charge_allowance[i] := p_amount[i];
            o_charge_grants[i] := 0;
            taken := taken || i;
            total := total + p_amount[i];
            counted := counted || p_apis[off[i] + 1 : off[i] + p_api_counts[i]];
        END IF;
        IF p_rate_e[i] IS NOT NULL THEN
            t := greatest(t, p_now[i]) + p_rate_e[i];
        END IF;
        IF p_slot_ceiling[i] IS NOT NULL THEN
            in_use := in_use + 1;
            o_slot_acquired[i] := true;
            o_slot_in_use[i] := in_use;
            holders := holders || p_request[i];
            leases := leases || (p_now[i] + p_slot_lease[i]);
        END IF;
    END LOOP;

    -- A request whose reservation, void or adjustment is recorded is a replay, which
    -- the steps above did not look for: when every step with credits reserves, the
    -- ledger's unique index finds it as the entries are inserted (SQLSTATE 23505);
    -- when one was refused, it is looked for first, since a replay is never refused.
    IF cardinality(taken) < asked AND EXISTS (SELECT 1 FROM tollgate_ledger e
                            WHERE e.account_id = p_account AND e.request_id = ANY (p_request)
                              AND e.kind IN ('reserve', 'adjust', 'void')) THEN
        RETURN;
    END IF;

    -- The writes, in the lock order: balance row, shard, ledger entries, reservation
    -- rows, then the slots (the rate row is held already).
    IF soonest IS NOT NULL AND (m.next_expiry IS NULL OR soonest < m.next_expiry) THEN
        UPDATE tollgate_balances b SET next_expiry = least(coalesce(b.next_expiry, soonest), soonest)
         WHERE b.account_id = p_account;
    END IF;
    IF cardinality(taken) > 0 THEN
        UPDATE tollgate_balance_shards s
           SET balance = s.balance - total, used = s.used + total, usage = tollgate_usage_add(s.usage, counted, 1)
         WHERE s.account_id = p_account AND s.shard = 0;
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, shard, generation, apis)
        SELECT p_account, p_request[i], 'reserve', -p_amount[i], ps, 0, gen,
               p_apis[off[i] + 1 : off[i] + p_api_counts[i]]
          FROM unnest(taken) i;
        INSERT INTO tollgate_reservations (account_id, request_id, expires)
        SELECT p_account, p_request[i], p_expires[i] FROM unnest(taken) i;
    END IF;
    IF t IS DISTINCT FROM tat0 THEN
        UPDATE tollgate_rate_limits r SET tat = t WHERE r.key = p_account;
    END IF;
    IF cardinality(holders) > 0 THEN
        -- Free rows first (never held, released, or whose lease ended), then new ones.
        UPDATE tollgate_slots l SET holder = g.holder, expires = g.expires
          FROM (SELECT f.ctid AS id, row_number() OVER (ORDER BY f.slot) AS rn
                  FROM (SELECT x.ctid, x.slot FROM tollgate_slots x
                         WHERE x.key = p_account AND (x.holder IS NULL OR x.expires <= lo)
                         ORDER BY x.slot LIMIT cardinality(holders)
                           FOR UPDATE SKIP LOCKED) f) free
          JOIN unnest(holders, leases) WITH ORDINALITY AS g(holder, expires, rn) ON g.rn = free.rn
         WHERE l.ctid = free.id;
        GET DIAGNOSTICS k = ROW_COUNT;
        IF k < cardinality(holders) THEN
            INSERT INTO tollgate_slots (key, slot, holder, expires)
            SELECT p_account, top + g.rn, g.holder, g.expires
              FROM (SELECT coalesce(max(x.slot), -1) AS top FROM tollgate_slots x WHERE x.key = p_account) mx,
                   unnest(holders[k + 1 :], leases[k + 1 :]) WITH ORDINALITY AS g(holder, expires, rn);
        END IF;
    END IF;
    o_done := true;
END
$$;

-- tollgate_admit_batch as in version 15.
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
    o_period_start timestamptz, o_period_end timestamptz,
    o_granted bigint, o_lapse bigint, o_lapsing bigint, o_charge_allowance bigint, o_charge_grants bigint)
LANGUAGE plpgsql AS $$
DECLARE
    off int := 0;
    a record;
    last int;
    fast record;
    done boolean := false;
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
    BEGIN
        fast := tollgate_admit_set(p_account, p_request, p_now, p_key_account, p_key_id, p_key_hash,
            p_rate_e, p_rate_window, p_slot_ceiling, p_slot_lease,
            p_credit_account, p_amount, p_apis, p_api_counts, p_expires);
        done := fast.o_done;
    EXCEPTION WHEN unique_violation THEN
        done := false; -- a replay, rolled back: one step after the other
    END;
    IF done THEN
        RETURN QUERY SELECT * FROM unnest(fast.o_denied, fast.o_status, fast.o_key_state, fast.o_rate_tat,
            fast.o_slot_acquired, fast.o_slot_in_use, fast.o_remaining, fast.o_used, fast.o_allowance,
            fast.o_period_start, fast.o_period_end,
            fast.o_granted, fast.o_lapse, fast.o_lapsing, fast.o_charge_allowance, fast.o_charge_grants);
        RETURN;
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
        o_granted := a.o_granted;
        o_lapse := a.o_lapse;
        o_lapsing := a.o_lapsing;
        o_charge_allowance := a.o_charge_allowance;
        o_charge_grants := a.o_charge_grants;
        RETURN NEXT;
    END LOOP;
END
$$;

-- tollgate_close_set as in version 15.
CREATE FUNCTION tollgate_close_set(p_account text, p_request uuid[], p_release boolean[],
    p_settle_account text[], p_refund bigint[], p_uncount_counts int[],
    OUT o_done boolean,
    OUT o_status int[], OUT o_remaining bigint[], OUT o_used bigint[], OUT o_allowance bigint[],
    OUT o_period_start timestamptz[], OUT o_period_end timestamptz[], OUT o_reserved bigint[],
    OUT o_granted bigint[], OUT o_lapse bigint[], OUT o_lapsing bigint[],
    OUT o_charge_allowance bigint[], OUT o_charge_grants bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    n int := coalesce(cardinality(p_request), 0);
    settled uuid[] := '{}';
    freed uuid[] := '{}';
    m tollgate_balances;
    k int;
    lt record;
    took jsonb;                            -- per settled request: [amount, taken from the lots]
BEGIN
    o_done := false;
    IF n = 0 THEN
        RETURN;
    END IF;
    FOR i IN 1 .. n LOOP
        IF p_settle_account[i] IS NOT NULL THEN
            IF p_settle_account[i] <> p_account OR p_refund[i] <> 0 OR p_uncount_counts[i] <> 0 THEN
                RETURN;
            END IF;
            settled := settled || p_request[i];
        END IF;
        IF p_release[i] THEN
            freed := freed || p_request[i];
        END IF;
    END LOOP;
    IF (SELECT count(DISTINCT r) FROM unnest(p_request) r) <> n THEN
        RETURN;
    END IF;
    IF cardinality(settled) > 0 THEN
        SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        -- Whoever deletes a reservation's row closes it: every row must still be there.
        DELETE FROM tollgate_reservations r WHERE r.account_id = p_account AND r.request_id = ANY (settled);
        GET DIAGNOSTICS k = ROW_COUNT;
        IF k <> cardinality(settled) THEN
            RAISE SQLSTATE 'TG002' USING MESSAGE = 'a reservation of the batch is no longer open';
        END IF;
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start)
        SELECT p_account, q, 'settle', 0, m.period_start FROM unnest(settled) q;
        lt := tollgate_totals(p_account, true);
        SELECT jsonb_object_agg(l.request_id::text, jsonb_build_array(-l.amount, coalesce(l.granted, 0))) INTO took
          FROM tollgate_ledger l
         WHERE l.account_id = p_account AND l.kind = 'reserve' AND l.request_id = ANY (settled);
    END IF;
    IF cardinality(freed) > 0 THEN
        UPDATE tollgate_slots l SET holder = NULL, expires = 0 WHERE l.key = p_account AND l.holder = ANY (freed);
    END IF;
    o_status := array_fill(0, ARRAY[n]);
    o_remaining := array_fill(NULL::bigint, ARRAY[n]);
    o_used := array_fill(NULL::bigint, ARRAY[n]);
    o_allowance := array_fill(NULL::bigint, ARRAY[n]);
    o_period_start := array_fill(NULL::timestamptz, ARRAY[n]);
    o_period_end := array_fill(NULL::timestamptz, ARRAY[n]);
    o_reserved := array_fill(NULL::bigint, ARRAY[n]);
    o_granted := array_fill(NULL::bigint, ARRAY[n]);
    o_lapse := array_fill(NULL::bigint, ARRAY[n]);
    o_lapsing := array_fill(NULL::bigint, ARRAY[n]);
    o_charge_allowance := array_fill(NULL::bigint, ARRAY[n]);
    o_charge_grants := array_fill(NULL::bigint, ARRAY[n]);
    FOR i IN 1 .. n LOOP
        IF p_settle_account[i] IS NOT NULL THEN
            o_remaining[i] := lt.o_remaining;
            o_granted[i] := lt.o_granted;
            o_lapse[i] := lt.o_lapse;
            o_lapsing[i] := lt.o_lapsing;
            o_charge_grants[i] := (took -> p_request[i]::text ->> 1)::bigint;
            o_charge_allowance[i] := (took -> p_request[i]::text ->> 0)::bigint - o_charge_grants[i];
            o_used[i] := lt.o_used;
            o_allowance[i] := m.allowance;
            o_period_start[i] := m.period_start;
            o_period_end[i] := m.period_end;
        END IF;
    END LOOP;
    o_done := true;
END
$$;

-- tollgate_close_batch as in version 15.
CREATE FUNCTION tollgate_close_batch(
    p_account text, p_request uuid[], p_release boolean[],
    p_settle_account text[], p_refund bigint[], p_uncount text[], p_uncount_counts int[],
    p_start timestamptz[], p_end timestamptz[], p_allowance bigint[], p_now bigint[])
RETURNS TABLE (o_status int, o_remaining bigint, o_used bigint, o_allowance bigint,
    o_period_start timestamptz, o_period_end timestamptz, o_reserved bigint,
    o_granted bigint, o_lapse bigint, o_lapsing bigint, o_charge_allowance bigint, o_charge_grants bigint)
LANGUAGE plpgsql AS $$
DECLARE
    off int := 0;
    c record;
    last int;
    locked boolean := false;
    fast record;
    done boolean := false;
BEGIN
    SELECT i INTO last FROM generate_subscripts(p_settle_account, 1) AS i
     WHERE p_settle_account[i] IS NOT NULL ORDER BY p_start[i] DESC LIMIT 1;
    IF last IS NOT NULL THEN
        PERFORM tollgate_renew(p_settle_account[last], p_start[last], p_end[last], p_allowance[last]);
        IF EXISTS (SELECT 1 FROM generate_subscripts(p_request, 1) AS i
                    WHERE p_settle_account[i] IS NOT NULL AND (p_refund[i] > 0 OR p_uncount_counts[i] > 0))
           OR EXISTS (SELECT 1 FROM tollgate_balances b
                       WHERE b.account_id = p_settle_account[last] AND b.next_expiry <= (SELECT max(t) FROM unnest(p_now) t))
           OR EXISTS (SELECT 1 FROM tollgate_balances b
                       WHERE b.account_id = p_settle_account[last] AND b.next_lapse <= (SELECT max(t) FROM unnest(p_now) t))
           OR EXISTS (SELECT 1 FROM generate_subscripts(p_request, 1) AS i
                        JOIN tollgate_reservations r ON r.account_id = p_settle_account[i] AND r.request_id = p_request[i]
                       WHERE r.expires <= p_now[i]) THEN
            PERFORM 1 FROM tollgate_balances b WHERE b.account_id = p_settle_account[last] FOR UPDATE;
            PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_settle_account[last] ORDER BY s.shard FOR UPDATE;
            locked := true;
        END IF;
        -- The batch's reservation rows, in the order of their ids, before any is closed.
        PERFORM 1 FROM tollgate_reservations r
         WHERE r.account_id = p_settle_account[last] AND r.request_id = ANY (p_request)
         ORDER BY r.request_id FOR UPDATE;
    END IF;
    IF NOT locked THEN
        BEGIN
            fast := tollgate_close_set(p_account, p_request, p_release, p_settle_account, p_refund, p_uncount_counts);
            done := fast.o_done;
        EXCEPTION WHEN SQLSTATE 'TG002' OR unique_violation THEN
            done := false; -- rolled back: one closing after the other
        END;
        IF done THEN
            RETURN QUERY SELECT * FROM unnest(fast.o_status, fast.o_remaining, fast.o_used, fast.o_allowance,
                fast.o_period_start, fast.o_period_end, fast.o_reserved,
                fast.o_granted, fast.o_lapse, fast.o_lapsing, fast.o_charge_allowance, fast.o_charge_grants);
            RETURN;
        END IF;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(p_request), 0) LOOP
        c := tollgate_close(p_account, p_request[i], p_release[i],
            p_settle_account[i], p_refund[i], p_uncount[off + 1 : off + p_uncount_counts[i]],
            p_start[i], p_end[i], p_allowance[i], CASE WHEN locked THEN p_now[i] END);
        off := off + p_uncount_counts[i];
        o_status := c.o_status;
        o_remaining := c.o_remaining;
        o_used := c.o_used;
        o_allowance := c.o_allowance;
        o_period_start := c.o_period_start;
        o_period_end := c.o_period_end;
        o_reserved := c.o_reserved;
        o_granted := c.o_granted;
        o_lapse := c.o_lapse;
        o_lapsing := c.o_lapsing;
        o_charge_allowance := c.o_charge_allowance;
        o_charge_grants := c.o_charge_grants;
        RETURN NEXT;
    END LOOP;
END
$$;
