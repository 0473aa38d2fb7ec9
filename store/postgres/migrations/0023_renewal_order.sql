-- Tollgate schema, version 23: one order for what an operation does before its own
-- work; settlements answered by the reservation's state; the reservations open at the
-- upgrade to version 19 given back as that upgrade would have split them.
--
-- The order (billing/driver.Ledger). An operation given a Now and a period first drops
-- the lots lapsed at Now; if the period starts later than the stored one, it voids the
-- reservations expired by that start (and by Now), in the old period, and then renews
-- the balance, its allowance cut by what the lots then hold; then it voids the
-- reservations expired since, at Now, whose credits a lot gets back within 2^53-1.
-- Versions 19 to 21 renewed first, then voided, then dropped the lapsed lots, so that
-- near 2^53-1 a lot lapsed at Now still cut the renewed allowance, and a void of the old
-- period found its room taken by the renewal. tollgate_prepare does it, for every
-- function that operates on an account but tollgate_adjust (left as version 19 made
-- it: renewal, voids, lapses); tollgate_void drops the lapsed lots first too, so that a
-- sweep's room never counts them. The batches renew ahead of their steps only when no
-- void and no lapse is due within them.
--
-- Settlements (tollgate_settle). A settlement of a request that has no reservation
-- records nothing (versions 1 to 21 recorded a 'void', which made a later reservation
-- with that id take nothing, and an adjustment with it change nothing: the 'void'
-- entries already recorded stay, and keep doing so); one naming an adjustment is a
-- replay. A settlement of a reservation that is no longer open answers as it ended
-- (settled: a replay; voided: status 5), whatever its refund; only an open
-- reservation's refund is checked against its amount.
--
-- Reservations open at the upgrade to version 19 recorded no parts: their refund went
-- to the allowance, which the next renewal drops, even where version 19 had made the
-- credits a lot that never lapses. When this Migrate applies version 19 too (Migrate
-- says so in the setting tollgate.migrate_applying), such a reservation gives back as
-- if its refund had happened just before that upgrade: to the allowance what the
-- allowance explains (the allowance less the used credits after the refund, never
-- lowering what is left of it), the rest to the lot that never lapses; after a renewal,
-- the allowance's share is lost, as for any refund after a renewal, and the rest still
-- goes to that lot (within 2^53-1). A schema already at version 19 or later keeps its
-- reservations as they are: those open at that upgrade cannot be told from the ones
-- made since that took nothing from the lots, and have long expired.

ALTER TABLE tollgate_ledger ADD COLUMN unsplit boolean; -- 'reserve': open at the upgrade to version 19 (below)

-- tollgate_give_unsplit gives back p_refund credits of a reservation open at the upgrade
-- to version 19 (unsplit), in the period it was made in, as that upgrade would have
-- split them: to the allowance, on shard p_shard, what the allowance explains (p_allowance
-- less the used credits once p_used is taken off them, never lowering what is left of
-- it), the rest to the lot that never lapses. It takes p_used off the used credits and
-- uncounts p_apis on that shard. The caller holds every shard.
CREATE FUNCTION tollgate_give_unsplit(p_account text, p_allowance bigint, p_shard int, p_refund bigint,
    p_used bigint, p_apis text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    rem bigint;
    spent bigint;
    a bigint;
BEGIN
    SELECT t.o_remaining, t.o_used INTO rem, spent FROM tollgate_sums(p_account) t;
    a := least(p_refund, greatest(0, p_allowance - (spent - p_used) - rem));
    UPDATE tollgate_balance_shards s
       SET balance = s.balance + a, used = s.used - p_used, usage = tollgate_usage_add(s.usage, p_apis, -1)
     WHERE s.account_id = p_account AND s.shard = p_shard;
    IF p_refund > a THEN
        INSERT INTO tollgate_grant_lots AS g (account_id, expires, credits) VALUES (p_account, 0, p_refund - a)
        ON CONFLICT (account_id, expires) DO UPDATE SET credits = g.credits + excluded.credits;
        UPDATE tollgate_balances b SET has_lots = true WHERE b.account_id = p_account AND NOT b.has_lots;
    END IF;
END
$$;

-- tollgate_due reports whether a void or a lapse of the account is due by p_now (false
-- for a NULL p_now or an account without a balance).
CREATE FUNCTION tollgate_due(p_account text, p_now bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT b.next_expiry <= p_now OR b.next_lapse <= p_now
                       FROM tollgate_balances b WHERE b.account_id = p_account), false);
END
$$;

-- tollgate_prepare brings the account to p_now and to the period p_start..p_end before
-- an operation, in the order above, and returns its balance row as it then is (a row of
-- NULLs if the account has no balance). A NULL p_now drops and voids nothing. When
-- nothing is due it reads the balance row alone; otherwise it holds the balance row and
-- every shard of the account, in the lock order of version 5.
CREATE FUNCTION tollgate_prepare(p_account text, p_start timestamptz, p_end timestamptz, p_allowance bigint,
    p_now bigint) RETURNS tollgate_balances
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    start bigint := (extract(epoch FROM p_start) * 1000000)::bigint * 1000;
BEGIN
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
    IF NOT FOUND OR (p_start <= m.period_start AND NOT coalesce(m.next_expiry <= p_now OR m.next_lapse <= p_now, false)) THEN
        RETURN m;
    END IF;
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
    PERFORM tollgate_lapse(m, p_now);
    IF p_start > m.period_start THEN
        IF p_now IS NOT NULL AND m.next_expiry <= least(p_now, start) THEN
            PERFORM tollgate_void(p_account, least(p_now, start), 64);
        END IF;
        PERFORM tollgate_renew(p_account, p_start, p_end, p_allowance);
        SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
    END IF;
    IF m.next_expiry <= p_now THEN
        PERFORM tollgate_void(p_account, p_now, 64);
    END IF;
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
    RETURN m;
END
$$;

-- tollgate_void as in version 21, dropping the lots lapsed at p_now first, and giving
-- back those open at the upgrade to version 19 as tollgate_give_unsplit does.
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
    PERFORM tollgate_lapse(m, p_now);
    WITH gone AS (
        DELETE FROM tollgate_reservations d
         WHERE d.account_id = p_account AND d.request_id IN (
               SELECT x.request_id FROM tollgate_reservations x
                WHERE x.account_id = p_account AND x.expires <= p_now
                  AND (p_request IS NULL OR x.request_id = p_request)
                ORDER BY x.expires LIMIT p_limit
                  FOR UPDATE SKIP LOCKED)
        RETURNING d.request_id, d.expires),
    e AS (
        SELECT l.request_id, -l.amount AS amount, coalesce(l.granted, 0) AS granted, l.apis, l.period_start,
               coalesce(l.period_start = m.period_start, false) AS credited,
               coalesce(l.unsplit AND l.period_start = m.period_start, false) AS unsplit,
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
                         WHERE e2.credited AND NOT e2.unsplit AND e2.target = e.target GROUP BY api) a) AS calls
          FROM e WHERE e.credited AND NOT e.unsplit GROUP BY e.target),
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
    SELECT count(*)::int, array_agg(closed.request_id ORDER BY g.expires, closed.request_id) INTO n, ids
      FROM closed JOIN gone g ON g.request_id = closed.request_id;
    -- Those of the current period first: the credit above has already taken their
    -- amounts off the used credits, so until their lots have them back, the room of a
    -- reservation of an earlier period would count them as free. Then the others in
    -- the order of their expiry (and of their ids), as every store voids them: what
    -- each gets back within the bound depends on what those before it got.
    FOR v IN SELECT l.lots, l.granted, l.period_start, -l.amount AS amount, l.apis,
                    coalesce(l.unsplit AND l.period_start = m.period_start, false) AS unsplit,
                    CASE WHEN l.generation = m.generation THEN l.shard ELSE 0 END AS target
               FROM tollgate_ledger l
              WHERE l.account_id = p_account AND l.kind = 'reserve' AND l.request_id = ANY (ids)
                AND (l.lots IS NOT NULL OR l.unsplit)
              ORDER BY l.period_start = m.period_start DESC, array_position(ids, l.request_id) LOOP
        IF v.unsplit THEN
            PERFORM tollgate_give_unsplit(p_account, m.allowance, v.target, v.amount, v.amount, v.apis);
        ELSE
            PERFORM tollgate_give_lots(p_account, v.lots, v.granted, p_now,
                CASE WHEN v.period_start = m.period_start THEN v.granted ELSE tollgate_room(p_account) END);
        END IF;
    END LOOP;
    UPDATE tollgate_balances b
       SET next_expiry = (SELECT min(x.expires) FROM tollgate_reservations x WHERE x.account_id = p_account)
     WHERE b.account_id = p_account;
    RETURN n;
END
$$;

-- tollgate_settle is billing.Ledger.Settle, as in version 19, with tollgate_prepare once
-- it holds the reservation's row (version 5's lock order), and deciding by the
-- reservation's state first. Status: 0 settled, or a replay (a
-- reservation settled before, whatever the refund, or an adjustment's id); 1 no
-- balance; 2 no reservation (nothing is recorded); 3 a refund outside 0..reserved of an
-- open reservation, which stays open (o_reserved says the reserved amount); 5 voided at
-- its expiry, before or now (a settlement at or after the expiry voids it), whatever the
-- refund. o_charge_allowance and o_charge_grants divide the charge kept (NULL unless this
-- call closed the reservation).
CREATE OR REPLACE FUNCTION tollgate_settle(p_account text, p_request uuid, p_refund bigint, p_uncount text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz, OUT o_reserved bigint,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint,
    OUT o_charge_allowance bigint, OUT o_charge_grants bigint)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    e tollgate_ledger;
    closed text;
    credit boolean;
    lots_back boolean;
    unsplit boolean;
    due boolean;
    still_open boolean;
    due_at bigint;
    rest bigint;
BEGIN
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
    IF NOT FOUND THEN
        o_status := 1;
        RETURN;
    END IF;
    o_status := 0;
    SELECT * INTO e FROM tollgate_ledger l
     WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind = 'reserve';
    IF NOT FOUND THEN
        m := tollgate_prepare(p_account, p_start, p_end, p_allowance, p_now);
        o_allowance := m.allowance;
        o_period_start := m.period_start;
        o_period_end := m.period_end;
        IF NOT EXISTS (SELECT 1 FROM tollgate_ledger l
                        WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind = 'adjust') THEN
            o_status := 2;
        END IF;
        SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_account, m.has_lots);
        RETURN;
    END IF;
    SELECT r.expires INTO due_at FROM tollgate_reservations r
     WHERE r.account_id = p_account AND r.request_id = p_request;
    -- The locks in the order of version 5: the balance row and every shard when
    -- tollgate_prepare has work to do or the reservation is past its expiry; every shard
    -- to give back to lots; the one shard a refund is credited to; then the
    -- reservation's row, before any void takes another's without waiting.
    due := p_start > m.period_start OR coalesce(m.next_expiry <= p_now OR m.next_lapse <= p_now OR due_at <= p_now, false);
    lots_back := p_refund > 0 AND (coalesce(e.granted, 0) > 0 OR coalesce(e.unsplit, false));
    credit := e.period_start = m.period_start AND (p_refund > 0 OR coalesce(cardinality(p_uncount), 0) > 0);
    IF due THEN
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
    PERFORM 1 FROM tollgate_reservations r
     WHERE r.account_id = p_account AND r.request_id = p_request FOR UPDATE;
    still_open := FOUND;
    IF due THEN
        -- What became due since the decision (a reservation of a lagging clock, say) is
        -- left to the next operation: a void now would take the balance row after the
        -- reservation's.
        m := tollgate_prepare(p_account, p_start, p_end, p_allowance, p_now);
        IF still_open AND due_at <= p_now THEN
            PERFORM tollgate_void(p_account, p_now, 1, p_request); -- unless among the 64 voided
        END IF;
        still_open := still_open AND EXISTS (SELECT 1 FROM tollgate_reservations r
                                  WHERE r.account_id = p_account AND r.request_id = p_request);
    END IF;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    unsplit := coalesce(e.unsplit AND e.period_start = m.period_start, false);
    credit := e.period_start = m.period_start AND (p_refund > 0 OR coalesce(cardinality(p_uncount), 0) > 0);
    -- A reservation no longer open answers as it ended, whatever the refund.
    IF NOT still_open THEN
        SELECT l.kind INTO closed FROM tollgate_ledger l
         WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind IN ('settle', 'refund', 'expire');
    END IF;
    IF closed = 'expire' THEN
        o_status := 5;
    ELSIF closed IS NULL AND (p_refund < 0 OR p_refund > -e.amount) THEN
        o_status := 3;
        o_reserved := -e.amount;
    ELSIF closed IS NULL THEN
        DELETE FROM tollgate_reservations r WHERE r.account_id = p_account AND r.request_id = p_request;
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, apis)
        VALUES (p_account, p_request, CASE WHEN (credit OR lots_back) AND p_refund > 0 THEN 'refund' ELSE 'settle' END,
                CASE WHEN credit OR lots_back THEN p_refund ELSE 0 END, m.period_start, CASE WHEN credit THEN p_uncount END)
        ON CONFLICT (account_id, request_id) WHERE kind IN ('settle', 'refund', 'expire') DO NOTHING;
        IF FOUND THEN
            IF unsplit AND p_refund > 0 THEN
                PERFORM tollgate_give_unsplit(p_account, m.allowance,
                    CASE WHEN e.generation = m.generation THEN e.shard ELSE 0 END, p_refund, p_refund, p_uncount);
            ELSE
                rest := p_refund;
                IF lots_back THEN
                    rest := tollgate_give_lots(p_account, e.lots, p_refund, p_now,
                        CASE WHEN e.period_start = m.period_start THEN p_refund ELSE tollgate_room(p_account) END);
                END IF;
                IF credit AND NOT tollgate_credit(e, rest, p_refund, p_uncount) AND NOT lots_back THEN
                    UPDATE tollgate_ledger l SET kind = 'settle', amount = 0, apis = NULL
                     WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind IN ('settle', 'refund');
                END IF;
            END IF;
            o_charge_allowance := least(-e.amount - coalesce(e.granted, 0), -e.amount - p_refund);
            o_charge_grants := -e.amount - p_refund - o_charge_allowance;
        END IF;
    END IF;
    SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing
      FROM tollgate_totals(p_account, m.has_lots OR coalesce(e.granted, 0) > 0);
END
$$;

-- tollgate_reserve as in version 19, after tollgate_prepare.
CREATE OR REPLACE FUNCTION tollgate_reserve(p_account text, p_request uuid, p_amount bigint, p_apis text[],
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
    m := tollgate_prepare(p_account, p_start, p_end, p_allowance, p_now);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    next_at := m.next_expiry;
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

-- tollgate_balance as in version 19, after tollgate_prepare.
CREATE OR REPLACE FUNCTION tollgate_balance(p_account text, p_start timestamptz, p_end timestamptz, p_allowance bigint,
    p_now bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
BEGIN
    m := tollgate_prepare(p_account, p_start, p_end, p_allowance, p_now);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_account, m.has_lots);
END
$$;

-- tollgate_admit as in version 19, the credits part after tollgate_prepare.
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
        m := tollgate_prepare(p_credit_account, p_start, p_end, p_allowance, p_now);
        IF m.account_id IS NULL THEN
            o_status := 1;
            RETURN;
        END IF;
        next_at := m.next_expiry;
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

-- tollgate_admit_batch as in version 19, renewing ahead of the steps only when nothing is
-- due within them.
CREATE OR REPLACE FUNCTION tollgate_admit_batch(
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
        -- The renewal first, so that the steps decided as a whole find it made; unless a
        -- void or a lapse is due by the batch's latest instant: the steps then renew one
        -- after the other, each in the ledger's order (tollgate_prepare).
        IF NOT tollgate_due(p_credit_account[last], (SELECT max(x) FROM unnest(p_now) x)) THEN
            PERFORM tollgate_renew(p_credit_account[last], p_start[last], p_end[last], p_allowance[last]);
        END IF;
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

-- tollgate_close_batch as in version 19, renewing ahead of the closings only when nothing
-- is due within them.
CREATE OR REPLACE FUNCTION tollgate_close_batch(
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
        -- As in tollgate_admit_batch: no renewal ahead of the closings when a void or a
        -- lapse is due by their latest instant (they are then taken one by one, locked).
        IF NOT tollgate_due(p_settle_account[last], (SELECT max(x) FROM unnest(p_now) x)) THEN
            PERFORM tollgate_renew(p_settle_account[last], p_start[last], p_end[last], p_allowance[last]);
        END IF;
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

-- The reservations open at the upgrade to version 19, when this Migrate applied it: those
-- of the current period are marked unsplit, and given back by tollgate_give_unsplit while
-- the period lasts. For a refund after a renewal, which gives back to the lots alone,
-- each records the parts a full refund would have had just then: the first credits, up
-- to k = the used credits + what is left of the allowance - the allowance (summed over
-- the account's shards), from the lot that never lapses (made, at 0, if the account has
-- none, as a spent lot stays), the rest from the allowance. A reservation of an earlier
-- period gave back nothing before version 19, and still does not.
DO $$
BEGIN
    IF NOT '19' = ANY (string_to_array(coalesce(current_setting('tollgate.migrate_applying', true), ''), ',')) THEN
        RETURN;
    END IF;
    WITH legacy AS (
        SELECT l.account_id, l.request_id, -l.amount AS amount
          FROM tollgate_reservations r
          JOIN tollgate_ledger l ON l.account_id = r.account_id AND l.request_id = r.request_id AND l.kind = 'reserve'
          JOIN tollgate_balances b ON b.account_id = r.account_id AND b.period_start = l.period_start
         WHERE l.lots IS NULL AND l.granted IS NULL),
    k AS (
        SELECT s.account_id, sum(s.used) + sum(s.balance) - min(b.allowance) AS k
          FROM tollgate_balance_shards s JOIN tollgate_balances b ON b.account_id = s.account_id
         WHERE s.account_id IN (SELECT o.account_id FROM legacy o)
         GROUP BY s.account_id),
    marked AS (
        UPDATE tollgate_ledger l
           SET unsplit = true,
               lots = CASE WHEN least(o.amount, k.k) > 0 THEN jsonb_build_array(jsonb_build_array(0, least(o.amount, k.k))) END,
               granted = CASE WHEN least(o.amount, k.k) > 0 THEN least(o.amount, k.k) END
          FROM legacy o JOIN k ON k.account_id = o.account_id
         WHERE l.account_id = o.account_id AND l.request_id = o.request_id AND l.kind = 'reserve'
        RETURNING l.account_id, l.granted)
    INSERT INTO tollgate_grant_lots (account_id, expires, credits)
    SELECT DISTINCT x.account_id, 0, 0 FROM marked x WHERE x.granted IS NOT NULL
    ON CONFLICT (account_id, expires) DO NOTHING;
    UPDATE tollgate_balances b SET has_lots = true
     WHERE NOT b.has_lots AND EXISTS (SELECT 1 FROM tollgate_grant_lots g WHERE g.account_id = b.account_id);
END
$$;
