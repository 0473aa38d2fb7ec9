-- Tollgate schema, version 35: rolls (billing/driver.Roller), for credit blocks: a
-- settlement, the calls it paid for counted, and the next reservation, in one call of
-- tollgate_roll, one transaction.
--
-- A roll is tollgate_settle followed by tollgate_charge, the core of tollgate_reserve,
-- both called as they are, so that a roll settles and reserves exactly as a Settle and
-- a Reserve do (the refund to the lots a reservation took from, then to the allowance
-- of its period; the next reservation from the allowance first, then the grants, on
-- any shard that covers it, or pooling the shards). What a roll adds is the order in
-- which it takes its locks, since it holds a reservation's row (which a settlement
-- takes last, version 5) before it reserves (which takes a shard, and may write the
-- balance row): it takes beforehand, in the lock order of version 5, every row that
-- either part would take.
--
-- On the fast path (nothing due at the roll's Now, no renewal, and a reservation that
-- took nothing from the lots), the roll takes the balance row only when the next
-- reservation expires before the account's next expiry (it then writes next_expiry, as
-- tollgate_expect does), then the shard that counted the settled reservation, and then
-- the settlement runs with no Now (nothing is due; what a lagging clock makes due
-- meanwhile is left to the next operation, as a settlement leaves it). The refund goes
-- back to that shard, so the shard covers the next reservation, whose amount is at
-- most the refund: tollgate_take finds it, or another shard that is free, without
-- waiting. The counts go to that shard too. If what it read before it held the shard
-- no longer holds (a renewal, a void that moved next_expiry, a change of shards), the
-- shard is given back (a subtransaction rolled back) and the roll takes the slow path.
--
-- On the slow path the roll holds the balance row and every shard, in shard order,
-- before the settlement: the renewal and the voids that tollgate_prepare makes, the
-- lots that a refund gives back to, and a next reservation that needs more than one
-- shard holds all happen under locks already held. The next reservation takes what the
-- balance holds after the settlement, at most its amount: nothing can take it from
-- under the roll.
--
-- A roll answers by the settled reservation's state first: one settled before is a
-- replay (with what the next reservation holds, if it is open), one voided answers
-- status 5, one never made status 2. Only a roll of an open reservation checks that the
-- next reservation's request id is new (status 8, changing nothing); a request id that
-- a concurrent transaction uses meanwhile fails the roll as a whole (unique_violation).

-- tollgate_usage_more adds p_calls[i] calls of API p_apis[i] to the call counts p_usage.
CREATE FUNCTION tollgate_usage_more(p_usage jsonb, p_apis text[], p_calls bigint[]) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    u jsonb := p_usage;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_apis), 0) LOOP
        u := jsonb_set(u, ARRAY[p_apis[i]], to_jsonb(coalesce((u ->> p_apis[i])::bigint, 0) + p_calls[i]));
    END LOOP;
    RETURN u;
END
$$;

-- tollgate_roll is billing/driver.Roller.Roll: it settles reservation p_request as
-- tollgate_settle does (p_refund back, p_uncount uncounted); if that settles it now and
-- the balance is still in the reservation's period, it counts p_calls[i] calls of
-- p_apis[i] on the shard that counted the reservation; and, when p_next is not NULL, it
-- reserves p_next (no APIs, expiring at p_next_expires) for the least of p_next_amount
-- and what the balance holds then. Status: 0 rolled, or a replay (o_replay: the
-- reservation was settled before; o_next is what p_next holds if it is open, else 0);
-- 1 no balance; 2 no reservation; 3 a refund outside 0..reserved (o_reserved); 5 voided
-- at its expiry; 8 p_next was used before by the account. Nothing changes unless the
-- status is 0 and not a replay, but what a settlement also does first (the renewal, the
-- voids due). o_charge_allowance and o_charge_grants divide the charge the settlement
-- kept; o_next is the amount p_next holds; the balance is the account's after the roll.
CREATE FUNCTION tollgate_roll(p_account text, p_request uuid, p_refund bigint, p_uncount text[],
    p_apis text[], p_calls bigint[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint,
    p_next uuid, p_next_amount bigint, p_next_expires bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz, OUT o_reserved bigint,
    OUT o_granted bigint, OUT o_lapse bigint, OUT o_lapsing bigint,
    OUT o_charge_allowance bigint, OUT o_charge_grants bigint, OUT o_next bigint, OUT o_replay boolean)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    e tollgate_ledger;
    st record;
    c record;
    seen boolean := false;
    settles boolean := false;
    fast boolean := false;
    wrote boolean := false;
    due_at bigint;
    amount bigint;
BEGIN
    o_next := 0;
    o_replay := false;
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
    IF NOT FOUND THEN
        o_status := 1;
        RETURN;
    END IF;
    -- Whether p_next was used, read before the reservation's state: a roll sent again
    -- while the first is committing then sees either the reservation open and p_next
    -- new, or p_next used and the reservation settled (a replay), never p_next used
    -- and the reservation open.
    IF p_next IS NOT NULL THEN
        seen := EXISTS (SELECT 1 FROM tollgate_ledger l
                         WHERE l.account_id = p_account AND l.request_id = p_next AND l.kind IN ('reserve', 'adjust', 'void'));
    END IF;
    SELECT * INTO e FROM tollgate_ledger l
     WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind = 'reserve';
    IF FOUND THEN
        SELECT r.expires INTO due_at FROM tollgate_reservations r
         WHERE r.account_id = p_account AND r.request_id = p_request;
        settles := FOUND AND NOT coalesce(due_at <= p_now, false) AND p_refund BETWEEN 0 AND -e.amount;
    END IF;

    IF NOT settles THEN
        -- Settled before, voided, never made, or a refund out of range: tollgate_settle
        -- answers, and changes nothing but what it does first. (A reservation made
        -- since it was looked for is not settled by a roll that did not take its locks:
        -- a refund of -1 makes it answer status 3, reported as status 2.)
        st := tollgate_settle(p_account, p_request, CASE WHEN e.request_id IS NULL THEN -1 ELSE p_refund END,
            p_uncount, p_start, p_end, p_allowance, p_now);
        IF st.o_charge_allowance IS NOT NULL THEN
            RAISE EXCEPTION 'tollgate_roll: reservation % settled without its roll', p_request;
        END IF;
    ELSIF seen THEN
        o_status := 8;
        o_allowance := m.allowance;
        o_period_start := m.period_start;
        o_period_end := m.period_end;
        SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_account, m.has_lots);
        RETURN;
    ELSE
        -- The locks, in the lock order of version 5 (see above).
        fast := p_start <= m.period_start AND e.period_start = m.period_start
            AND NOT coalesce(m.next_expiry <= p_now OR m.next_lapse <= p_now, false)
            AND coalesce(e.granted, 0) = 0 AND NOT coalesce(e.unsplit, false);
        IF fast THEN
            BEGIN
                IF p_next IS NOT NULL AND (m.next_expiry IS NULL OR p_next_expires < m.next_expiry) THEN
                    PERFORM tollgate_expect(p_account, m.next_expiry, p_next_expires);
                    wrote := true;
                END IF;
                PERFORM 1 FROM tollgate_balance_shards s
                 WHERE s.account_id = p_account
                   AND s.shard = CASE WHEN s.generation = e.generation THEN e.shard ELSE 0 END
                   AND s.period_start = e.period_start
                   FOR UPDATE;
                IF NOT FOUND THEN
                    RAISE SQLSTATE 'TG004' USING MESSAGE = 'the roll takes the slow path';
                END IF;
                -- The balance row as it is now that the shard is held: no renewal, void or
                -- lapse can change it until this transaction ends (each holds every shard).
                SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
                IF NOT (p_start <= m.period_start AND e.period_start = m.period_start)
                   OR coalesce(m.next_expiry <= p_now OR m.next_lapse <= p_now, false)
                   OR (p_next IS NOT NULL AND NOT wrote AND NOT coalesce(m.next_expiry <= p_next_expires, false)) THEN
                    RAISE SQLSTATE 'TG004' USING MESSAGE = 'the roll takes the slow path';
                END IF;
            EXCEPTION WHEN SQLSTATE 'TG004' THEN
                fast := false; -- rolled back: the shard's lock, and the balance row's, with it
            END;
        END IF;
        IF NOT fast THEN
            SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
            PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
        END IF;
        st := tollgate_settle(p_account, p_request, p_refund, p_uncount, p_start, p_end, p_allowance,
            CASE WHEN fast THEN NULL ELSE p_now END);
    END IF;
    o_status := st.o_status;
    IF e.request_id IS NULL AND o_status = 3 THEN
        o_status := 2;
    END IF;
    o_reserved := st.o_reserved;
    o_remaining := st.o_remaining; -- the balance after the settlement; after the roll below
    o_used := st.o_used;
    o_granted := st.o_granted;
    o_lapse := st.o_lapse;
    o_lapsing := st.o_lapsing;
    o_allowance := st.o_allowance;
    o_period_start := st.o_period_start;
    o_period_end := st.o_period_end;
    o_charge_allowance := st.o_charge_allowance;
    o_charge_grants := st.o_charge_grants;
    IF o_status <> 0 OR st.o_charge_allowance IS NULL THEN
        -- Not settled now: settled before (a replay), voided, or refused.
        o_replay := o_status = 0;
        IF o_replay AND p_next IS NOT NULL THEN
            SELECT -l.amount INTO o_next
              FROM tollgate_reservations r
              JOIN tollgate_ledger l ON l.account_id = r.account_id AND l.request_id = r.request_id AND l.kind = 'reserve'
             WHERE r.account_id = p_account AND r.request_id = p_next;
            o_next := coalesce(o_next, 0);
        END IF;
        RETURN;
    END IF;

    -- The counts, in the reservation's period only, on the shard that counted it (held).
    IF e.period_start = st.o_period_start AND coalesce(cardinality(p_apis), 0) > 0 THEN
        UPDATE tollgate_balance_shards s
           SET usage = tollgate_usage_more(s.usage, p_apis, p_calls)
         WHERE s.account_id = p_account
           AND s.shard = CASE WHEN s.generation = e.generation THEN e.shard ELSE 0 END
           AND s.period_start = e.period_start;
    END IF;

    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
    IF p_next IS NOT NULL THEN
        IF NOT fast THEN
            PERFORM tollgate_expect(p_account, m.next_expiry, p_next_expires);
        END IF;
        amount := least(p_next_amount, greatest(st.o_remaining, 0));
        c := tollgate_charge(p_account, m.shards, p_next, amount, NULL, p_next_expires);
        IF c.o_outcome = 2 THEN
            RAISE unique_violation USING MESSAGE = format(
                'tollgate_roll: request %s, the next reservation of the roll of %s, was used meanwhile', p_next, p_request);
        ELSIF c.o_outcome <> 0 THEN
            RAISE EXCEPTION 'tollgate_roll: the balance does not cover the next reservation %, of % credits', p_next, amount;
        END IF;
        o_next := amount;
    END IF;
    SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing
      FROM tollgate_totals(p_account, m.has_lots OR coalesce(e.granted, 0) > 0);
END
$$;
