-- Tollgate schema, version 25: tollgate_adjust brings the balance to p_now and to its
-- period in the ledger's order (billing/driver.Ledger), as every other function that
-- operates on an account does since version 23: it calls tollgate_prepare (drop the lots
-- lapsed at p_now; if the period starts later than the stored one, void the
-- reservations expired by its start in the old period, then renew; then void those
-- expired since, up to p_now) where version 22 renewed first, then voided, then dropped
-- the lapsed lots. Near 2^53-1 that order let a lot lapsed at p_now cut the renewed
-- allowance, and a void of the old period find its room taken by the renewal, so that
-- an adjustment made at a renewal left another balance than any other operation.
--
-- The rest is version 22's: the revision of a change of the allowance, the shards, and
-- p_revision last with its default, for the instances of version 21 still running
-- during a rolling upgrade. tollgate_prepare holds the balance row and every shard only
-- when it has work to do; tollgate_adjust takes them after it, in the same order, as
-- version 22 did after its renewal.

-- tollgate_adjust is billing.Ledger.Adjust. p_part is 0 for the grants, 1 for the
-- allowance; p_expires is a grant's lot (0: never lapses); p_revision orders the
-- changes of the allowance (see version 22). Status: 0 adjusted (or a replay, or a change
-- of the allowance that changes nothing), 1 no balance, 4 insufficient credits, 6 the
-- remaining plus used credits would pass p_max, 7 a grant would start a lot past
-- p_max_lots. It holds the balance row and every shard (and so the lots) while it
-- decides.
CREATE OR REPLACE FUNCTION tollgate_adjust(p_account text, p_request uuid, p_amount bigint, p_part int, p_expires bigint,
    p_reason text, p_start timestamptz, p_end timestamptz, p_allowance bigint, p_now bigint, p_max bigint,
    p_max_lots int, p_revision bigint DEFAULT NULL,
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
    d bigint;
    sets boolean;
    n int;
BEGIN
    m := tollgate_prepare(p_account, p_start, p_end, p_allowance, p_now);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    o_status := 0;
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
    IF NOT EXISTS (SELECT 1 FROM tollgate_ledger e
                    WHERE e.account_id = p_account AND e.request_id = p_request AND e.kind IN ('reserve', 'adjust', 'void')) THEN
        SELECT t.o_remaining, t.o_used INTO rem, spent FROM tollgate_sums(p_account) t;
        SELECT coalesce(sum(g.credits), 0)::bigint INTO granted FROM tollgate_grant_lots g WHERE g.account_id = p_account;
        d := p_amount; -- the change of the allowance left, for p_part 1
        sets := p_part = 1 AND p_revision IS NOT NULL;
        IF sets THEN
            sets := m.period_start = p_start AND p_revision > m.allowance_revision;
            d := CASE WHEN sets THEN p_allowance - m.allowance ELSE 0 END;
        END IF;
        IF (p_part = 1 AND d > p_max - rem - spent - granted) OR (p_part = 0 AND p_amount > p_max - rem - spent - granted) THEN
            o_status := 6;
        ELSIF p_part = 0 AND p_amount < 0 AND rem + granted < -p_amount THEN
            o_status := 4;
        ELSIF p_part = 0 AND p_amount > 0
              AND NOT EXISTS (SELECT 1 FROM tollgate_grant_lots g
                               WHERE g.account_id = p_account AND g.expires = p_expires AND g.credits > 0)
              AND (SELECT count(*) FROM tollgate_grant_lots g WHERE g.account_id = p_account AND g.credits > 0) >= p_max_lots THEN
            o_status := 7;
        ELSE
            IF p_part = 1 THEN
                d := greatest(d, -rem);
            END IF;
            INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, reason, part, lots)
            VALUES (p_account, p_request, 'adjust', CASE WHEN p_part = 1 THEN d ELSE p_amount END, m.period_start, p_reason,
                    CASE WHEN p_part = 1 THEN 'allowance' ELSE 'grants' END,
                    CASE WHEN p_part = 0 AND p_amount > 0 THEN jsonb_build_array(jsonb_build_array(p_expires, p_amount)) END)
            ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING;
            IF FOUND THEN
                IF p_part = 1 THEN
                    IF d <> 0 THEN
                        a := rem + d;
                        SELECT count(*)::int INTO n FROM tollgate_balance_shards s WHERE s.account_id = p_account;
                        UPDATE tollgate_balance_shards s
                           SET balance = a / n + CASE WHEN s.shard < a % n THEN 1 ELSE 0 END
                         WHERE s.account_id = p_account;
                    END IF;
                    IF sets OR p_revision IS NULL THEN
                        UPDATE tollgate_balances b
                           SET allowance = p_allowance, allowance_revision = coalesce(p_revision, b.allowance_revision)
                         WHERE b.account_id = p_account
                        RETURNING * INTO m;
                    END IF;
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
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    SELECT * INTO o_remaining, o_used, o_granted, o_lapse, o_lapsing FROM tollgate_totals(p_account, true);
END
$$;
