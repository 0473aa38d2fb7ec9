-- Tollgate schema, version 36: a batch of closings finds its reservation rows one probe
-- of the primary key per request.
--
-- A batch of closings (tollgate_close_batch) locked its requests' reservation rows, and
-- tollgate_close_set deleted them, with request_id = ANY (the batch's ids). The planner,
-- which expects an account to have a few reservation rows (those open), scans the
-- primary key on the account alone and filters the ids (a bitmap scan, with a custom
-- plan as with the generic one). But every reservation ever closed leaves a dead entry
-- in that index until a vacuum removes it, and a bitmap scan never marks an entry dead,
-- so each batch read every reservation the account had made since the last vacuum
-- (autovacuum, at best once a minute, or never when it is off): on a hot account 5,757
-- entries a scan after 6,000 calls, and its calls grew slower with every call made
-- (BenchmarkHotInstances, and TestHotAccountWorkFlat, which counts the index entries and
-- rows a call reads). The rows are now locked with a subquery per id, which the planner
-- cannot turn into a join, and deleted with one statement per id: each a probe of the
-- whole key, which reads that request's entry alone however many dead ones the account
-- has.

-- tollgate_close_batch as in version 23, locking the batch's reservation rows one by one
-- (in the order of their ids, as before).
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
        -- The batch's reservation rows, in the order of their ids, before any is closed:
        -- one probe of the primary key per id.
        PERFORM (SELECT 1 FROM tollgate_reservations r
                  WHERE r.account_id = p_settle_account[last] AND r.request_id = s.q FOR UPDATE)
           FROM (SELECT DISTINCT q FROM unnest(p_request) AS q ORDER BY q) s;
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

-- tollgate_close_set as in version 31, deleting the reservation rows one by one.
CREATE OR REPLACE FUNCTION tollgate_close_set(p_account text, p_request uuid[], p_release boolean[],
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
    gone int := 0;                         -- the reservation rows deleted
    rq uuid;
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
        -- One statement per id, each one probe of the primary key.
        FOREACH rq IN ARRAY settled LOOP
            DELETE FROM tollgate_reservations r WHERE r.account_id = p_account AND r.request_id = rq;
            GET DIAGNOSTICS k = ROW_COUNT;
            gone := gone + k;
        END LOOP;
        IF gone <> cardinality(settled) THEN
            RAISE SQLSTATE 'TG002' USING MESSAGE = 'a reservation of the batch is no longer open';
        END IF;
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start)
        SELECT p_account, q, 'settle', 0, m.period_start FROM unnest(settled) q;
        lt := tollgate_totals(p_account, true);
        SELECT jsonb_object_agg(q::text, (SELECT jsonb_build_array(-l.amount, coalesce(l.granted, 0))
                                            FROM tollgate_ledger l
                                           WHERE l.account_id = p_account AND l.request_id = q AND l.kind = 'reserve'))
          INTO took FROM unnest(settled) q;
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
