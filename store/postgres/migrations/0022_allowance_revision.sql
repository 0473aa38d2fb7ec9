-- Tollgate schema, version 22: a change of plan sets the period's allowance, ordered by
-- the account's revision (billing/driver.PartAllowance).
--
-- Until this version an adjustment of the allowance added its amount (the difference
-- of the two plans' allowances) to what was left of the allowance of whatever period
-- the balance held. Two races made that inexact: a call that renewed the balance into
-- the next period on the new plan, between the account's update and the adjustment,
-- got the difference added on top of the new plan's allowance; and two changes made at
-- once (an upgrade and the downgrade that undoes it) whose adjustments arrived in the
-- reverse order left the upgrade's credits on an account whose record names the
-- downgrade (the downgrade took at most what was left, the upgrade then added it all).
--
-- Now the adjustment sets the allowance of its period to p_allowance, at p_revision,
-- the revision of the account's record that the change wrote:
-- tollgate_balances.allowance_revision is the revision of the last change of the
-- allowance the balance applied. After the usual renewal, if the balance is of the
-- adjustment's period and p_revision is above allowance_revision, what is left of the
-- allowance (the shards) changes by p_allowance - allowance, a decrease taking at most
-- what is left, an increase bounded by p_max (status 6, as for a grant), and the row
-- takes p_allowance and p_revision; otherwise nothing changes, and the adjustment is
-- recorded all the same (an 'adjust' entry of 0), so that its replay is recognised. The
-- entry's amount is the change made, so that the entries of a period still sum to
-- what is left.
--
-- Every balance starts at revision 0 (the column's default): the balances of an
-- upgraded schema keep their allowance and what is left of it, and take the first
-- change made after the upgrade. tollgate_renew rewrites the allowance and the period
-- only, so a renewal keeps allowance_revision: a change that arrives after a later
-- one, even in the next period, changes nothing.
--
-- Sharded balances: the allowance left is spread over the shards, as version 19 did,
-- while tollgate_adjust holds the balance row and every shard; it reads the row again
-- once it holds it, since a renewal or another change may have written it since
-- tollgate_renew read it.
--
-- p_revision comes last, with a default: an instance of version 21, during a rolling
-- upgrade, still calls tollgate_adjust with twelve arguments. Its grants are made as
-- before; its change of the allowance (p_revision NULL) adds p_amount as version 21
-- did, and the row takes p_allowance, the new plan's, so that the changes made after
-- it count from that allowance.

ALTER TABLE tollgate_balances ADD COLUMN allowance_revision bigint NOT NULL DEFAULT 0;

DROP FUNCTION tollgate_adjust(text, uuid, bigint, int, bigint, text, timestamptz, timestamptz, bigint, bigint, bigint, int);

-- tollgate_adjust is billing.Ledger.Adjust. p_part is 0 for the grants, 1 for the
-- allowance; p_expires is a grant's lot (0: never lapses); p_revision orders the
-- changes of the allowance (see above). Status: 0 adjusted (or a replay, or a change
-- of the allowance that changes nothing), 1 no balance, 4 insufficient credits, 6 the
-- remaining plus used credits would pass p_max, 7 a grant would start a lot past
-- p_max_lots. It holds the balance row and every shard (and so the lots) while it
-- decides.
CREATE FUNCTION tollgate_adjust(p_account text, p_request uuid, p_amount bigint, p_part int, p_expires bigint,
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
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    PERFORM tollgate_void_due(m, p_now);
    PERFORM tollgate_lapse(m, p_now);
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
