-- Tollgate schema, version 38: a roll on its fast path writes the shard once.
--
-- On the fast path (version 35: nothing due, no renewal, a reservation that took
-- nothing from the lots), a roll called tollgate_settle and then tollgate_charge as
-- they are: the shard was updated three times (the refund, the counts, the next
-- reservation), the balance row read four times, the totals summed twice, and the
-- next reservation looked for a shard that covers it among every shard of the
-- account. It cost PostgreSQL about 0.55 - 0.75 ms of executor time, a credit block's
-- roll being most of what the database does for a busy account. On the fast path the
-- roll now writes what those calls wrote, itself, once each: it updates the shard that
-- counted the settled reservation, which takes its lock (the refund back and the next
-- reservation taken from it, which it covers since its amount is at most the refund;
-- the settlement's uncounts, then the roll's counts), reads the balance row again, as
-- before, then deletes the reservation's row and records the 'refund' or 'settle'
-- entry as tollgate_settle would, in one statement (no row: the reservation was closed
-- meanwhile, and the roll takes the slow path, which answers as a settlement does), and
-- records the next reservation's 'reserve' entry, on that shard, and its row, in
-- another. The totals are read once, from the updated row when the account has one
-- shard and no lots. Only a roll whose next reservation the refund covers takes the
-- fast path (Roll.Check requires it of every roll). Anything that does not
-- hold rolls the subtransaction back, as before, and the slow path is unchanged.

CREATE OR REPLACE FUNCTION tollgate_roll(p_account text, p_request uuid, p_refund bigint, p_uncount text[],
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
    sh record;
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
        -- (Never NULL: a NULL argument takes the slow path, with its locks.)
        fast := coalesce(p_start <= m.period_start AND e.period_start = m.period_start
            AND NOT coalesce(m.next_expiry <= p_now OR m.next_lapse <= p_now, false)
            AND coalesce(e.granted, 0) = 0 AND NOT coalesce(e.unsplit, false)
            -- What the fast path writes holds for a next reservation the refund covers,
            -- as Roll.Check requires; anything else is left to the general functions.
            AND p_refund IS NOT NULL AND (p_next IS NULL OR p_next_amount BETWEEN 0 AND p_refund), false);
        IF fast THEN
            BEGIN
                IF p_next IS NOT NULL AND (m.next_expiry IS NULL OR p_next_expires < m.next_expiry) THEN
                    PERFORM tollgate_expect(p_account, m.next_expiry, p_next_expires);
                    wrote := true;
                END IF;
                -- The shard that counted the reservation, held by its update: the refund
                -- back and the next reservation taken from it (it covers it: the next
                -- reservation is at most the refund); the settlement's uncounts, then the
                -- roll's counts.
                amount := CASE WHEN p_next IS NULL THEN 0 ELSE p_next_amount END;
                UPDATE tollgate_balance_shards s
                   SET balance = s.balance + p_refund - amount, used = s.used - p_refund + amount,
                       usage = CASE WHEN coalesce(cardinality(p_apis), 0) > 0
                                    THEN tollgate_usage_more(tollgate_usage_add(s.usage, p_uncount, -1), p_apis, p_calls)
                                    ELSE tollgate_usage_add(s.usage, p_uncount, -1) END
                 WHERE s.account_id = p_account
                   AND s.shard = CASE WHEN s.generation = e.generation THEN e.shard ELSE 0 END
                   AND s.period_start = e.period_start
                RETURNING s.shard, s.generation, s.period_start, s.balance, s.used INTO sh;
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
                -- The settlement, as tollgate_settle makes it with nothing due and nothing
                -- from the lots: the reservation's row deleted (none: it was closed
                -- meanwhile) and the entry recorded, in one statement.
                WITH gone AS (
                    DELETE FROM tollgate_reservations r WHERE r.account_id = p_account AND r.request_id = p_request
                    RETURNING r.request_id)
                INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, apis)
                SELECT p_account, gone.request_id, CASE WHEN p_refund > 0 THEN 'refund' ELSE 'settle' END, p_refund,
                       m.period_start, CASE WHEN p_refund > 0 OR coalesce(cardinality(p_uncount), 0) > 0 THEN p_uncount END
                  FROM gone
                ON CONFLICT (account_id, request_id) WHERE kind IN ('settle', 'refund', 'expire') DO NOTHING;
                IF NOT FOUND THEN
                    RAISE SQLSTATE 'TG004' USING MESSAGE = 'the roll takes the slow path';
                END IF;
                -- The next reservation, on that shard: its entry and its row, in one statement.
                IF p_next IS NOT NULL THEN
                    WITH made AS (
                        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, shard, generation)
                        VALUES (p_account, p_next, 'reserve', -amount, sh.period_start, sh.shard, sh.generation)
                        ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING
                        RETURNING request_id)
                    INSERT INTO tollgate_reservations (account_id, request_id, expires)
                    SELECT p_account, made.request_id, p_next_expires FROM made;
                    IF NOT FOUND THEN
                        RAISE unique_violation USING MESSAGE = format(
                            'tollgate_roll: request %s, the next reservation of the roll of %s, was used meanwhile', p_next, p_request);
                    END IF;
                END IF;
            EXCEPTION WHEN SQLSTATE 'TG004' THEN
                fast := false; -- rolled back: the shard's lock, and the balance row's, with it
            END;
            IF fast THEN
                o_status := 0;
                o_allowance := m.allowance;
                o_period_start := m.period_start;
                o_period_end := m.period_end;
                o_charge_allowance := -e.amount - p_refund;
                o_charge_grants := 0;
                o_next := amount;
                IF m.shards = 1 AND NOT m.has_lots THEN
                    o_remaining := sh.balance;
                    o_used := sh.used;
                    o_granted := 0;
                ELSE
                    SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_account, m.has_lots);
                END IF;
                RETURN;
            END IF;
        END IF;
        -- The slow path (a fast roll has returned): the balance row and every shard, in
        -- shard order, then the settlement with its renewal and voids.
        SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
        PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
        st := tollgate_settle(p_account, p_request, p_refund, p_uncount, p_start, p_end, p_allowance, p_now);
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
        PERFORM tollgate_expect(p_account, m.next_expiry, p_next_expires);
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
