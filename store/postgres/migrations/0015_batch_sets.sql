-- Tollgate schema, version 15: batches of a hot account decided as a whole, in a fixed
-- number of statements, instead of one step after the other.
--
-- Until now a batch (Options.Batch) ran each of its steps as a single call would: about
-- fifteen statements per admission (key check, replay check, rate, slot count and
-- grant, renewal, void check, shard update, ledger entry, reservation row) and ten per
-- closing, each with its executor start-up, its index look-ups and its own row version
-- of the hot rows. Now the common batch is decided in one pass over its arrays, with no
-- statement per step: the rate row's tat, the key's slots in use and the single shard's
-- balance are read once, each step is judged in order against the running figures
-- exactly as the single calls would judge it one after the other, and the outcome is
-- written with one statement per table: one update of the rate row, of the slots, of
-- the shard and of next_expiry, one multi-row insert of the ledger entries and of the
-- reservation rows (closings: one delete of the reservation rows, one insert of the
-- entries, one update of the slots).
--
-- A batch is decided as a whole only when nothing in it needs the single calls' special
-- cases; otherwise it runs one step after the other, as before, with the same locks
-- already held (the prologue, which takes them, is unchanged). The special cases are:
-- a request id twice in the batch, or already known (a replay: its reservation, void or
-- slot exists); a credit account other than the batch's, none with a balance, or one
-- split into several shards; reservations of the account due to be voided (next_expiry
-- at or before a step's instant), or a lease of the key ending within the batch's
-- instants; and, for closings, a refund or calls to uncount, or a reservation that is no
-- longer open. The pass runs in a subtransaction: when a write finds one of them (the
-- ledger's unique index refuses the entry of a request it already has, a reservation's
-- row is gone), the subtransaction is rolled back and the batch runs one step after the
-- other.

-- tollgate_admit_set decides a batch of admission steps of p_account as a whole, under
-- the locks tollgate_admit_batch has taken (rate row, slot lock, balance row, shards), and
-- writes its outcome. o_done is false, with nothing written, when the batch has one of
-- the special cases above; a replay that it only finds as it writes raises a unique
-- violation, after which the caller rolls back what it wrote. The outcome arrays hold
-- one element per step, as tollgate_admit would report it.
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
    OUT o_period_start timestamptz[], OUT o_period_end timestamptz[])
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
            IF remaining < p_amount[i] THEN
                o_remaining[i] := remaining;
                o_used[i] := spent;
                o_denied[i] := 4;
                CONTINUE;
            END IF;
            remaining := remaining - p_amount[i];
            spent := spent + p_amount[i];
            o_remaining[i] := remaining;
            o_used[i] := spent;
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

-- tollgate_admit_batch as in version 4, deciding the batch as a whole when it can
-- (tollgate_admit_set), one step after the other otherwise.
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
    o_period_start timestamptz, o_period_end timestamptz)
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
            fast.o_period_start, fast.o_period_end);
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
        RETURN NEXT;
    END LOOP;
END
$$;

-- tollgate_close_set closes a batch of closings of p_account as a whole, under the locks
-- tollgate_close_batch has taken (the reservation rows of its settlements), when none of
-- them gives credits back or uncounts calls and no void is due: one delete of the
-- reservation rows, one insert of their 'settle' entries, one update of the slots
-- freed. o_done is false, with nothing written, when the batch has one of the special
-- cases above; it raises SQLSTATE TG002 when a reservation is no longer open, after
-- which the caller rolls back what it wrote. The outcome arrays hold one element per
-- closing, as tollgate_close would report it.
CREATE FUNCTION tollgate_close_set(p_account text, p_request uuid[], p_release boolean[],
    p_settle_account text[], p_refund bigint[], p_uncount_counts int[],
    OUT o_done boolean,
    OUT o_status int[], OUT o_remaining bigint[], OUT o_used bigint[], OUT o_allowance bigint[],
    OUT o_period_start timestamptz[], OUT o_period_end timestamptz[], OUT o_reserved bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    n int := coalesce(cardinality(p_request), 0);
    settled uuid[] := '{}';
    freed uuid[] := '{}';
    m tollgate_balances;
    rest bigint;
    spent bigint;
    k int;
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
        SELECT t.o_remaining, t.o_used INTO rest, spent FROM tollgate_sums(p_account) t;
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
    FOR i IN 1 .. n LOOP
        IF p_settle_account[i] IS NOT NULL THEN
            o_remaining[i] := rest;
            o_used[i] := spent;
            o_allowance[i] := m.allowance;
            o_period_start[i] := m.period_start;
            o_period_end[i] := m.period_end;
        END IF;
    END LOOP;
    o_done := true;
END
$$;

-- tollgate_close_batch as in version 5, closing the batch as a whole when it takes no
-- shard lock (tollgate_close_set), one closing after the other otherwise.
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
                fast.o_period_start, fast.o_period_end, fast.o_reserved);
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
        RETURN NEXT;
    END LOOP;
END
$$;
