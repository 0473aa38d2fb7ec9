-- Tollgate schema, version 31: the batches of an account split into shards; the
-- batches' lookups of ledger entries by request id, one index probe per id.
--
-- Until version 30 a batch of admissions (tollgate_admit_batch) of an account with more
-- than one shard held the balance row and every shard, and took its steps one after the
-- other, so that the batches of several instances, and sub-balances, did not compose:
-- each instance's batch of a hot account waited for the others'. A batch given a home
-- shard (p_home, which an instance picks once, at random) now takes the first shard
-- from its home on that covers the whole batch and that no other transaction holds
-- (FOR UPDATE SKIP LOCKED; the home shard itself, waiting for it, when none is free),
-- and decides its steps on that shard alone, as tollgate_admit_set does on an account
-- of one shard; the instances' batches then lock different rows. The balance row is
-- written (and held) only when a step's expiry comes before the account's next one,
-- before the shard, in the lock order of version 5. A step the shard does not cover is
-- refused when the account does not cover it either (the shard as held, the others as
-- of that instant, as tollgate_take decides it); when the account does cover it, or it
-- would reach the grants, or anything tollgate_admit_set leaves to the steps one after
-- the other happens (a replay found by the ledger's unique index, which two instances'
-- batches replaying each other's requests may meet as a deadlock), the batch is rolled
-- back to before its shard was taken and runs as in version 23. The batch's renewal, rate row and slot lock come first, as in version
-- 23. tollgate_admit_batch without p_home is unchanged, for instances of an earlier
-- release during an upgrade.
--
-- The lookups (version 19). A batch of closings read the 'reserve' entries of its
-- requests, and a batch of admissions with a refused step looked for replays among its
-- requests, with request_id = ANY (the batch's ids): the plan PL/pgSQL keeps for the
-- statement scans the index on the account alone and filters the ids, reading every
-- entry of the account's history, so that a hot account's closings grew slower with
-- every call it had made (BenchmarkHotInstances: 39 ms a batch after 12,800 calls).
-- They now look up each id on its own (a subquery per id, which the planner cannot
-- turn into a join), one probe of the unique index each.

-- tollgate_admit_home is tollgate_admit_set on one shard of an account of several, the
-- first that covers the batch from shard p_home (modulo the shards) on (see above). It
-- answers o_done false, leaving what it wrote to be rolled back, when it cannot decide.
CREATE FUNCTION tollgate_admit_home(
    p_account text, p_request uuid[], p_now bigint[],
    p_key_account text[], p_key_id text[], p_key_hash bytea[],
    p_rate_e bigint[], p_rate_window bigint[],
    p_slot_ceiling int[], p_slot_lease bigint[],
    p_credit_account text[], p_amount bigint[], p_apis text[], p_api_counts int[],
    p_expires bigint[], p_home int,
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
    sh int;                                -- the shard the batch takes from
    need bigint := 0;                      -- what the steps with credits ask in all
    others bigint;                         -- the other shards' balance and used credits
    others_used bigint;
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
            need := need + p_amount[i];
            soonest := least(soonest, p_expires[i]);
        END IF;
    END LOOP;
    IF (SELECT count(DISTINCT r) FROM unnest(p_request) r) <> n THEN
        RETURN;
    END IF;
    IF credits THEN
        SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
        IF NOT FOUND OR m.shards < 2 OR m.next_expiry <= hi OR m.next_lapse <= hi THEN
            RETURN;
        END IF;
        -- The balance row before any shard (the lock order of version 5), and only when
        -- the expiry of a step comes before the account's next one.
        IF m.next_expiry IS NULL OR soonest < m.next_expiry THEN
            UPDATE tollgate_balances b SET next_expiry = least(coalesce(b.next_expiry, soonest), soonest)
             WHERE b.account_id = p_account;
        END IF;
        -- The first shard from the home shard on that covers the batch and that no other
        -- transaction holds; else the home shard, once it is free.
        SELECT s.shard INTO sh FROM tollgate_balance_shards s
         WHERE s.account_id = p_account AND s.balance >= need
         ORDER BY (s.shard + m.shards - p_home % m.shards) % m.shards
         LIMIT 1 FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            SELECT s.shard INTO sh FROM tollgate_balance_shards s
             WHERE s.account_id = p_account AND s.shard = p_home % m.shards
             FOR UPDATE;
            IF NOT FOUND THEN
                RETURN;
            END IF;
        END IF;
        -- The shard as it is now that it is held, and the others as of the same instant.
        SELECT s.balance, s.used, s.generation, s.period_start INTO remaining, spent, gen, ps
          FROM tollgate_balance_shards s WHERE s.account_id = p_account AND s.shard = sh;
        IF ps <> m.period_start THEN
            RETURN;
        END IF;
        -- A void that held the balance row and every shard while this batch waited for
        -- its shard may have moved the account's next expiry since m was read (voided
        -- the reservation that set it): when the steps' expiry now comes first, the
        -- balance row must be written, before the shard, so one step after the other.
        -- (No void can change it again until this transaction ends: it would wait for
        -- the shard.)
        IF NOT (m.next_expiry IS NULL OR soonest < m.next_expiry) THEN
            PERFORM 1 FROM tollgate_balances b
             WHERE b.account_id = p_account AND b.next_expiry IS NOT NULL AND b.next_expiry <= soonest;
            IF NOT FOUND THEN
                RETURN;
            END IF;
        END IF;
        SELECT coalesce(sum(s.balance), 0)::bigint, coalesce(sum(s.used), 0)::bigint INTO others, others_used
          FROM tollgate_balance_shards s WHERE s.account_id = p_account AND s.shard <> sh;
        lt := tollgate_lots(p_account);
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
            o_granted[i] := lt.o_granted;
            o_lapse[i] := lt.o_lapse;
            o_lapsing[i] := lt.o_lapsing;
            IF remaining < p_amount[i] THEN
                -- The shard does not cover the step: it is refused only when the account
                -- does not, with the grants; otherwise the steps go one after the other.
                IF lt.o_granted > 0 OR others + remaining >= p_amount[i] THEN
                    RETURN;
                END IF;
                o_remaining[i] := others + remaining;
                o_used[i] := others_used + spent;
                o_denied[i] := 4;
                CONTINUE;
            END IF;
            remaining := remaining - p_amount[i];
            spent := spent + p_amount[i];
            o_remaining[i] := others + remaining + lt.o_granted;
            o_used[i] := others_used + spent;
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
    IF cardinality(taken) < asked AND coalesce((SELECT bool_or((SELECT true FROM tollgate_ledger e
                            WHERE e.account_id = p_account AND e.request_id = q
                              AND e.kind IN ('reserve', 'adjust', 'void')))
                          FROM unnest(p_request) q), false) THEN
        RETURN;
    END IF;

    -- The writes, in the lock order: shard (the balance row is written already), ledger
    -- entries, reservation rows, then the slots (the rate row is held already).
    IF cardinality(taken) > 0 THEN
        UPDATE tollgate_balance_shards s
           SET balance = s.balance - total, used = s.used + total, usage = tollgate_usage_add(s.usage, counted, 1)
         WHERE s.account_id = p_account AND s.shard = sh;
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, shard, generation, apis)
        SELECT p_account, p_request[i], 'reserve', -p_amount[i], ps, sh, gen,
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


-- tollgate_admit_batch with a home shard: as version 23's, but an account of several
-- shards takes its batch from one of them (tollgate_admit_home) when it can.
CREATE FUNCTION tollgate_admit_batch(
    p_account text, p_request uuid[], p_now bigint[],
    p_key_account text[], p_key_id text[], p_key_hash bytea[],
    p_rate_e bigint[], p_rate_window bigint[],
    p_slot_ceiling int[], p_slot_lease bigint[],
    p_credit_account text[], p_amount bigint[], p_apis text[], p_api_counts int[],
    p_start timestamptz[], p_end timestamptz[], p_allowance bigint[], p_expires bigint[], p_home int)
RETURNS TABLE (o_denied int, o_status int, o_key_state int, o_rate_tat bigint,
    o_slot_acquired boolean, o_slot_in_use int,
    o_remaining bigint, o_used bigint, o_allowance bigint,
    o_period_start timestamptz, o_period_end timestamptz,
    o_granted bigint, o_lapse bigint, o_lapsing bigint, o_charge_allowance bigint, o_charge_grants bigint)
LANGUAGE plpgsql AS $$
DECLARE
    last int;
    fast record;
    done boolean := false;
BEGIN
    SELECT i INTO last FROM generate_subscripts(p_credit_account, 1) AS i
     WHERE p_credit_account[i] IS NOT NULL ORDER BY p_start[i] DESC LIMIT 1;
    IF p_home IS NOT NULL AND p_home >= 0 AND last IS NOT NULL AND p_credit_account[last] = p_account
       AND EXISTS (SELECT 1 FROM tollgate_balances b WHERE b.account_id = p_account AND b.shards > 1) THEN
        -- As version 23 does it: the rate row, the slots, the renewal unless a void or a
        -- lapse is due within the batch.
        IF EXISTS (SELECT 1 FROM unnest(p_rate_e) x WHERE x IS NOT NULL) THEN
            PERFORM tollgate_rate_lock(p_account);
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_slot_ceiling) x WHERE x IS NOT NULL) THEN
            PERFORM pg_advisory_xact_lock(1953261427, hashtext(p_account));
        END IF;
        IF NOT tollgate_due(p_account, (SELECT max(x) FROM unnest(p_now) x)) THEN
            PERFORM tollgate_renew(p_account, p_start[last], p_end[last], p_allowance[last]);
        END IF;
        BEGIN
            fast := tollgate_admit_home(p_account, p_request, p_now, p_key_account, p_key_id, p_key_hash,
                p_rate_e, p_rate_window, p_slot_ceiling, p_slot_lease,
                p_credit_account, p_amount, p_apis, p_api_counts, p_expires, p_home);
            IF NOT fast.o_done THEN
                RAISE SQLSTATE 'TG003' USING MESSAGE = 'the batch is taken one step after the other';
            END IF;
            done := true;
        EXCEPTION WHEN SQLSTATE 'TG003' OR unique_violation OR deadlock_detected THEN
            -- Rolled back, the shard's lock with it. A deadlock: two instances' batches
            -- that replay requests of each other's, in different orders.
            done := false;
        END;
        IF done THEN
            RETURN QUERY SELECT * FROM unnest(fast.o_denied, fast.o_status, fast.o_key_state, fast.o_rate_tat,
                fast.o_slot_acquired, fast.o_slot_in_use, fast.o_remaining, fast.o_used, fast.o_allowance,
                fast.o_period_start, fast.o_period_end,
                fast.o_granted, fast.o_lapse, fast.o_lapsing, fast.o_charge_allowance, fast.o_charge_grants);
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM tollgate_admit_batch(p_account, p_request, p_now, p_key_account, p_key_id, p_key_hash,
        p_rate_e, p_rate_window, p_slot_ceiling, p_slot_lease,
        p_credit_account, p_amount, p_apis, p_api_counts, p_start, p_end, p_allowance, p_expires);
END
$$;

-- tollgate_admit_set as in version 19, looking up each request's replay on its own.
CREATE OR REPLACE FUNCTION tollgate_admit_set(
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
    IF cardinality(taken) < asked AND coalesce((SELECT bool_or((SELECT true FROM tollgate_ledger e
                            WHERE e.account_id = p_account AND e.request_id = q
                              AND e.kind IN ('reserve', 'adjust', 'void')))
                          FROM unnest(p_request) q), false) THEN
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

-- tollgate_close_set as in version 19, reading each request's 'reserve' entry on its own.
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
