-- Tollgate schema, version 29: the ledger without a global sequence, and its retention.
--
-- tollgate_ledger loses seq, an identity column that every entry drew from one sequence
-- and that nothing read: an entry is known by its account and request, in one of two
-- stages (the unique indexes tollgate_ledger_request and tollgate_ledger_settlement,
-- kept as they are), and an 'open' or 'renewal' entry by its account and period_start.
-- Dropping the column is a change of the catalog only: no rewrite of the table and no
-- index built, whatever the number of entries.
--
-- tollgate_ledger_periods knows each account's periods: one row per 'open' or
-- 'renewal' entry (a trigger on those entries alone keeps it; the entries of calls never
-- fire it), with next_start, the start of the account's next period once it has one.
-- The rows are filled from the entries already there first, before the trigger exists:
-- a renewal committed in between is missed, which only delays the compaction of the
-- period before it to the next renewal's.
--
-- tollgate_compact folds the entries of a request into tollgate_ledger_totals (per
-- account, period and kind: the number of entries and the sum of their amounts) once
-- every entry of the request belongs to a period that ended by p_before, a period that
-- the account's latest period started by p_before follows, and the reservation is not
-- open. A compaction holds the account (a transaction-level advisory lock, tried, never
-- waited for), so that compactions running together share the accounts and fold each
-- entry once; it takes no lock of the calls' and changes no balance, shard or lot.

CREATE TABLE tollgate_ledger_periods (
    account_id   text        NOT NULL,
    period_start timestamptz NOT NULL,
    next_start   timestamptz,                  -- NULL while the account has no later period
    compacted    boolean     NOT NULL DEFAULT false,
    CONSTRAINT tollgate_ledger_periods_pkey PRIMARY KEY (account_id, period_start)
);

CREATE INDEX tollgate_ledger_periods_due ON tollgate_ledger_periods (next_start)
    WHERE NOT compacted AND next_start IS NOT NULL;

CREATE TABLE tollgate_ledger_totals (
    account_id   text        NOT NULL,
    period_start timestamptz NOT NULL,
    kind         text        NOT NULL,
    entries      bigint      NOT NULL,
    amount       numeric     NOT NULL,
    CONSTRAINT tollgate_ledger_totals_pkey PRIMARY KEY (account_id, period_start, kind)
);

INSERT INTO tollgate_ledger_periods (account_id, period_start, next_start)
SELECT s.account_id, s.period_start, lead(s.period_start) OVER (PARTITION BY s.account_id ORDER BY s.period_start)
  FROM (SELECT DISTINCT l.account_id, l.period_start FROM tollgate_ledger l WHERE l.request_id IS NULL) s;

CREATE FUNCTION tollgate_ledger_period() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tollgate_ledger_periods p SET next_start = NEW.period_start
     WHERE p.account_id = NEW.account_id AND p.next_start IS NULL AND p.period_start < NEW.period_start;
    INSERT INTO tollgate_ledger_periods (account_id, period_start, next_start)
    VALUES (NEW.account_id, NEW.period_start,
            (SELECT min(p.period_start) FROM tollgate_ledger_periods p
              WHERE p.account_id = NEW.account_id AND p.period_start > NEW.period_start))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER tollgate_ledger_period AFTER INSERT ON tollgate_ledger
    FOR EACH ROW WHEN (NEW.request_id IS NULL) EXECUTE FUNCTION tollgate_ledger_period();

ALTER TABLE tollgate_ledger DROP COLUMN seq;

-- tollgate_compact folds the entries of up to p_limit requests, as the header says, and
-- returns how many requests it folded. It goes through the periods that ended by
-- p_before, the oldest end first; a period whose entries are all folded is marked
-- compacted and never read again.
CREATE FUNCTION tollgate_compact(p_before timestamptz, p_limit int) RETURNS int
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
                                          AND e.period_start >= d.period_start AND e.period_start < d.next_start) THEN
            UPDATE tollgate_ledger_periods p SET compacted = true
             WHERE p.account_id = d.account_id AND p.period_start = d.period_start;
        END IF;
    END LOOP;
    RETURN n;
END
$$;
