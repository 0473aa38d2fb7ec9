-- Tollgate schema, version 34: the periods that version 29's backfill missed.
--
-- Version 29 filled tollgate_ledger_periods from the 'open' and 'renewal' entries by
-- one read of the ledger, then created the trigger that adds a row for each new one:
-- an account opened, or renewed, by a transaction that committed between the two (the
-- trigger's creation waits for it) got no row for that period. The entries of an
-- account opened then were never compacted (no row's range covers its first period);
-- the period before a renewal made then was compacted only after the next renewal
-- (TestMigrateLedgerRetentionOpenDuringBackfill).
--
-- Since version 29 committed, the trigger adds the row of every new 'open' and
-- 'renewal' entry in the entry's own transaction, so an entry of the ledger whose
-- period has no row is one that version 29 missed, and this migration, which reads the
-- ledger after version 29 committed, finds them all: one read of the ledger, as
-- version 29's, that holds no call. For each period found missing, oldest first per
-- account, it then sets the next_start of the account's earlier rows that have none or
-- a later one, and adds the period's row, with the start of the next period it knows.
-- It holds tollgate_ledger_periods (SHARE ROW EXCLUSIVE, which only openings and
-- renewals wait for) from the first of those writes to its commit, and only when a
-- period is missing, so that a renewal committed meanwhile cannot leave a row without
-- its next_start.

DO $$
DECLARE
    accts text[];
    starts timestamptz[];
BEGIN
    SELECT array_agg(m.account_id ORDER BY m.account_id, m.period_start),
           array_agg(m.period_start ORDER BY m.account_id, m.period_start)
      INTO accts, starts
      FROM (SELECT DISTINCT l.account_id, l.period_start FROM tollgate_ledger l WHERE l.request_id IS NULL) m
     WHERE NOT EXISTS (SELECT 1 FROM tollgate_ledger_periods p
                        WHERE p.account_id = m.account_id AND p.period_start = m.period_start);
    IF accts IS NULL THEN
        RETURN;
    END IF;
    LOCK TABLE tollgate_ledger_periods IN SHARE ROW EXCLUSIVE MODE;
    FOR i IN 1 .. cardinality(accts) LOOP
        UPDATE tollgate_ledger_periods p SET next_start = starts[i]
         WHERE p.account_id = accts[i] AND p.period_start < starts[i]
           AND (p.next_start IS NULL OR p.next_start > starts[i]);
        INSERT INTO tollgate_ledger_periods (account_id, period_start, next_start)
        VALUES (accts[i], starts[i],
                (SELECT min(p.period_start) FROM tollgate_ledger_periods p
                  WHERE p.account_id = accts[i] AND p.period_start > starts[i]))
        ON CONFLICT DO NOTHING;
    END LOOP;
END
$$;
