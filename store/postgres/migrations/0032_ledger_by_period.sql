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
-- account and period start, and tollgate_compact (unchanged: the planner takes the new
-- index for its range of periods, with custom and generic plans alike) reads the
-- entries of the period it folds: 15 entries for the same compaction.
--
-- The index costs a call's 'reserve' entry one more index entry. Building it holds the
-- ledger's writes (calls wait) while it reads the table, seconds for millions of
-- entries: on a large ledger, build it beforehand without holding them,
--
--   CREATE INDEX CONCURRENTLY tollgate_ledger_by_period ON tollgate_ledger (account_id, period_start)
--       WHERE kind IN ('reserve', 'adjust', 'void');
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
    WHERE kind IN ('reserve', 'adjust', 'void');
