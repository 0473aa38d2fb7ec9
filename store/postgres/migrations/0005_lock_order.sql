-- Tollgate schema, version 5: every function takes its row locks in one order, so that
-- no two calls can deadlock, and a settlement made at or after its reservation's expiry
-- always finds it voided.
--
-- Lock order, which every function keeps:
--
--   1. the rate row (tollgate_rate_limits), then the slot's advisory lock;
--   2. the balance row (tollgate_balances);
--   3. the shards (tollgate_balance_shards): all of an account's, in shard order, or
--      the one shard a reservation takes from or a refund goes back to;
--   4. the reservation rows (tollgate_reservations): a settlement's own, or a batch of
--      closings' own in the order of their ids, waited for; then, by a void, the rows
--      it can have at once (FOR UPDATE SKIP LOCKED), never waited for (a new
--      reservation's row is created after its entry, 5, but no one can wait for a row
--      that does not exist yet);
--   5. the ledger entries of a request (tollgate_ledger's unique indexes);
--   6. the lease rows (tollgate_leases).
--
-- Version 4's settlement voided the account's expired reservations (2, 3, and rows of
-- 4) before it waited for its own row, and deleted that row before it credited a
-- refund to its shard: with a void or a batch of closings holding what it waited for
-- and waiting for its row, the two deadlocked. And a settlement at the expiry whose
-- void skipped its row (another settlement held it, then rolled back) went on to
-- settle it, charge kept. A settlement now decides first whether it voids (next_expiry
-- is due, or its own reservation has expired) and whether it credits, takes 2 and 3
-- or its shard accordingly, waits for its row, and only then voids: its own reservation
-- first, if expired. A batch of closings takes 2 and 3 first whenever one of its
-- settlements may void or credit, then its rows; otherwise its settlements void
-- nothing, since a void after the batch's rows would take 2 after 4.

-- tollgate_void voids up to p_limit of the account's reservations that are open past
-- their expiry at p_now (only p_request's, when it is not NULL), and returns how many it
-- voided, as version 4's did.
DROP FUNCTION tollgate_void(text, bigint, int);
CREATE FUNCTION tollgate_void(p_account text, p_now bigint, p_limit int, p_request uuid DEFAULT NULL) RETURNS int
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
                  AND (p_request IS NULL OR x.request_id = p_request)
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

-- tollgate_settle is billing.Ledger.Settle, as in version 4 (statuses, renewal, the
-- settlement of an unknown request), with the lock order above: a settlement that voids
-- (next_expiry is due, or its own reservation has expired) takes the balance row and
-- the shards, one that credits a refund takes its shard; then each waits for its
-- reservation's row (another settlement of it may hold it), before it voids any row.
-- A NULL p_now voids nothing.
CREATE OR REPLACE FUNCTION tollgate_settle(p_account text, p_request uuid, p_refund bigint, p_uncount text[],
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
    voiding boolean;
    due_at bigint;
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
    END IF;
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
        SELECT r.expires INTO due_at FROM tollgate_reservations r
         WHERE r.account_id = p_account AND r.request_id = p_request;
        voiding := coalesce(m.next_expiry <= p_now OR due_at <= p_now, false);
        credit := e.period_start = m.period_start AND (p_refund > 0 OR coalesce(cardinality(p_uncount), 0) > 0);
        IF voiding THEN
            PERFORM 1 FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
            PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
        ELSIF credit THEN
            PERFORM 1 FROM tollgate_balance_shards s
             WHERE s.account_id = p_account
               AND s.shard = CASE WHEN s.generation = e.generation THEN e.shard ELSE 0 END
               FOR UPDATE;
        END IF;
        PERFORM 1 FROM tollgate_reservations r
         WHERE r.account_id = p_account AND r.request_id = p_request FOR UPDATE;
        IF voiding THEN
            -- This reservation first, if it has expired (the row is this transaction's
            -- now, so the void does not skip it), then the account's others.
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

-- tollgate_close_batch, as in version 4, with the lock order above: the balance row and
-- the shards are taken first when a settlement may credit (a refund, calls to uncount)
-- or void (next_expiry is due, or one of the batch's own reservations has expired);
-- otherwise its settlements are made with a NULL now, voiding nothing.
CREATE OR REPLACE FUNCTION tollgate_close_batch(
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
    locked boolean := false;
BEGIN
    SELECT i INTO last FROM generate_subscripts(p_settle_account, 1) AS i
     WHERE p_settle_account[i] IS NOT NULL ORDER BY p_start[i] DESC LIMIT 1;
    IF last IS NOT NULL THEN
        PERFORM tollgate_renew(p_settle_account[last], p_start[last], p_end[last], p_allowance[last]);
        IF EXISTS (SELECT 1 FROM generate_subscripts(p_request, 1) AS i
                    WHERE p_settle_account[i] IS NOT NULL AND (p_refund[i] > 0 OR p_uncount_counts[i] > 0))
           OR EXISTS (SELECT 1 FROM tollgate_balances b
                       WHERE b.account_id = p_settle_account[last] AND b.next_expiry <= (SELECT max(t) FROM unnest(p_now) t))
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
        RETURN NEXT;
    END LOOP;
END
$$;
