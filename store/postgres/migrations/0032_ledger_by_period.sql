-- Tollgate schema, version 32: the entries of calls indexed by account and period, so
-- that a compaction reads the period it folds and not the account's whole history.
--
-- Until version 31, tollgate_compact found the requests of an ended period by reading
-- every 'reserve', 'adjust' and 'void' entry of the account (through the index
-- tollgate_ledger_request, on account and request id) and keeping those of the period,
-- twice per period: to pick the requests, then to learn whether any was left. Its cost
-- grew with the account's history, the current period's calls included: 80,019 entries
-- read to fold 3 requests of an account with 20,000 calls in its current period
-- (TestCompactReadsThePeriodOnly). tollgate_ledger_by_period indexes those entries by
-- account and period start, and tollgate_compact reads the entries of the period it
-- folds through it: 15 entries for the same compaction, with custom and generic plans
-- alike.
--
-- The index is partial on a condition that every entry meets (period_start >
-- '-infinity') and that only tollgate_compact states: the calls' lookups of an entry
-- by account and request id cannot use it. Without it, a planner without statistics
-- of the ledger (before its first ANALYZE) took the smaller index of periods for those
-- lookups, on account alone: a call of the account above read its 40,000 entries.
--
-- The index costs a call's 'reserve' entry one more index entry (3 more buffers, one
-- more WAL record). Building it holds the ledger's writes (calls wait) while it reads
-- the table (3.6 to 3.9 s for 2,041,209 entries): on a large ledger, build it beforehand
-- without holding them,
--
--   CREATE INDEX CONCURRENTLY tollgate_ledger_by_period ON tollgate_ledger (account_id, period_start)
--       WHERE kind IN ('reserve', 'adjust', 'void') AND period_start > '-infinity';
--
-- and this migration keeps it. An index of that name that a failed concurrent build
-- left invalid is dropped and built again.

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i
                WHERE i.indexrelid = to_regclass('tollgate_ledger_by_period') AND NOT i.indisvalid) THEN
        DROP INDEX tollgate_ledger_by_period;
    END IF;
END
$$;

CREATE INDEX IF NOT EXISTS tollgate_ledger_by_period ON tollgate_ledger (account_id, period_start)
    WHERE kind IN ('reserve', 'adjust', 'void') AND period_start > '-infinity';

-- tollgate_compact as in version 29, its reads of a period's entries stating the
-- condition of tollgate_ledger_by_period.
CREATE OR REPLACE FUNCTION tollgate_compact(p_before timestamptz, p_limit int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    d record;
    q timestamptz;
    n int := 0;
    k int;
BEGIN
    FOR d IN SELECT p.account_id, p.period_start, p.next_start FROM tollgate_ledger_periods p
              WHERE NOT p.compacted AND p.next_start <= p_before
              ORDER BY p.next_start, p.account_id LOOP
        EXIT WHEN n >= p_limit;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtext('tollgate_compact'), hashtext(d.account_id));
        -- The latest period of the account that started by p_before: every period
        -- before it has ended by then.
        SELECT max(x.period_start) INTO q FROM tollgate_ledger_periods x
         WHERE x.account_id = d.account_id AND x.period_start <= p_before;
        WITH picked AS (
            SELECT e.request_id FROM tollgate_ledger e
             WHERE e.account_id = d.account_id AND e.kind IN ('reserve', 'adjust', 'void')
               AND e.period_start > '-infinity' -- tollgate_ledger_by_period's condition
               AND e.period_start >= d.period_start AND e.period_start < d.next_start
               AND NOT EXISTS (SELECT 1 FROM tollgate_reservations r
                                WHERE r.account_id = d.account_id AND r.request_id = e.request_id)
               AND NOT EXISTS (SELECT 1 FROM tollgate_ledger c
                                WHERE c.account_id = d.account_id AND c.request_id = e.request_id
                                  AND c.kind IN ('settle', 'refund', 'expire') AND c.period_start >= q)
             LIMIT p_limit - n
               FOR UPDATE SKIP LOCKED),
        opened AS (
            DELETE FROM tollgate_ledger l USING picked
             WHERE l.account_id = d.account_id AND l.kind IN ('reserve', 'adjust', 'void')
               AND l.request_id = picked.request_id
            RETURNING l.period_start, l.kind, l.amount),
        closed AS (
            DELETE FROM tollgate_ledger l USING picked
             WHERE l.account_id = d.account_id AND l.kind IN ('settle', 'refund', 'expire')
               AND l.request_id = picked.request_id
            RETURNING l.period_start, l.kind, l.amount),
        summed AS (
            INSERT INTO tollgate_ledger_totals AS t (account_id, period_start, kind, entries, amount)
            SELECT d.account_id, g.period_start, g.kind, count(*), sum(g.amount)
              FROM (SELECT * FROM opened UNION ALL SELECT * FROM closed) g
             GROUP BY g.period_start, g.kind
             ORDER BY g.period_start, g.kind
            ON CONFLICT (account_id, period_start, kind)
            DO UPDATE SET entries = t.entries + excluded.entries, amount = t.amount + excluded.amount)
        SELECT count(*)::int INTO k FROM opened;
        n := n + k;
        IF n < p_limit AND NOT EXISTS (SELECT 1 FROM tollgate_ledger e
                                        WHERE e.account_id = d.account_id AND e.kind IN ('reserve', 'adjust', 'void')
                                          AND e.period_start > '-infinity'
                                          AND e.period_start >= d.period_start AND e.period_start < d.next_start) THEN
            UPDATE tollgate_ledger_periods p SET compacted = true
             WHERE p.account_id = d.account_id AND p.period_start = d.period_start;
        END IF;
    END LOOP;
    RETURN n;
END
$$;
