-- Tollgate schema, version 21: voids give back to the grant lots within 2^53-1.
--
-- tollgate_void (version 19) credits the reservations it voids of the current period
-- (their allowance part, and their amounts off the used credits) in one statement,
-- then gives back to the lots, one reservation after the other, in no order; a
-- reservation of an earlier period (open across a renewal) gets back to its lots what
-- the bound leaves room for (tollgate_room). A reservation of the current period whose
-- lots were not given back yet had left the used credits without being in the lots:
-- the room counted its credits as free, and the remaining plus used credits could pass
-- 2^53-1 by them. The lots are now given back to the reservations of the current period
-- first, then to the others, in the order of their expiry and then of their ids, the
-- order in which the other stores void them.

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
        RETURNING d.request_id, d.expires),
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
    SELECT count(*)::int, array_agg(closed.request_id ORDER BY g.expires, closed.request_id) INTO n, ids
      FROM closed JOIN gone g ON g.request_id = closed.request_id;
    -- Those of the current period first: the credit above has already taken their
    -- amounts off the used credits, so until their lots have them back, the room of a
    -- reservation of an earlier period would count them as free. Then the others in
    -- the order of their expiry (and of their ids), as every store voids them: what
    -- each gets back within the bound depends on what those before it got.
    FOR v IN SELECT l.lots, l.granted, l.period_start FROM tollgate_ledger l
              WHERE l.account_id = p_account AND l.kind = 'reserve' AND l.request_id = ANY (ids) AND l.lots IS NOT NULL
              ORDER BY l.period_start = m.period_start DESC, array_position(ids, l.request_id) LOOP
        PERFORM tollgate_give_lots(p_account, v.lots, v.granted, p_now,
            CASE WHEN v.period_start = m.period_start THEN v.granted ELSE tollgate_room(p_account) END);
    END LOOP;
    UPDATE tollgate_balances b
       SET next_expiry = (SELECT min(x.expires) FROM tollgate_reservations x WHERE x.account_id = p_account)
     WHERE b.account_id = p_account;
    RETURN n;
END
$$;
