-- Tollgate schema, version 33: a sweep steps over the due reservations of an account
-- it passed in one probe, not in one probe each.
--
-- tollgate_sweep (version 30) walks the due entries of tollgate_reservations_by_expiry
-- one probe past the last at a time, and passes an account that another transaction
-- holds (or that it took already): it then probed that account's next due reservation,
-- and the next, one statement each, before it reached another account's. A held
-- account with 1,000 reservations due, interleaved with 8 of 4 other accounts, cost a
-- sweep 2,012 scans of the index (TestSweepStepsOverHeldAccount); 20,000 due cost 0.2
-- to 0.3 s per sweep call. The probe now leaves out the accounts the call has passed,
-- within the scan: the held account's due entries are stepped over as the one scan
-- that finds the next account reads them, and a call makes one probe per account it
-- meets (the same sweep: 14 scans in its two calls, each entry read no more than
-- before).
--
-- Nothing else changes: at most 32 accounts per call, each taken only if its balance
-- row is free (FOR UPDATE SKIP LOCKED) and held to the end of the transaction, and
-- voided with tollgate_void.

CREATE OR REPLACE FUNCTION tollgate_sweep(p_now bigint, p_limit int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int := 0;
    taken int := 0;
    seen text[] := '{}';                   -- the accounts met: taken, or held by another
    e bigint;
    a text := '';
BEGIN
    IF p_limit <= 0 THEN
        RETURN 0;
    END IF;
    -- Nothing due: one probe of the index.
    SELECT min(x.expires) INTO e FROM tollgate_reservations x;
    IF e IS NULL OR e > p_now THEN
        RETURN 0;
    END IF;
    e := e - 1;
    LOOP
        -- The next due reservation of an account not met yet: the entries of those met
        -- are passed within the scan.
        SELECT x.expires, x.account_id INTO e, a FROM tollgate_reservations x
         WHERE (x.expires, x.account_id) > (e, a) AND x.expires <= p_now AND x.account_id <> ALL (seen)
         ORDER BY x.expires, x.account_id LIMIT 1;
        EXIT WHEN NOT FOUND;
        seen := seen || a;
        PERFORM 1 FROM tollgate_balances b WHERE b.account_id = a FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        taken := taken + 1; -- held until the transaction ends, voided or not
        -- Locked now: is anything of it still due?
        IF EXISTS (SELECT 1 FROM tollgate_reservations x WHERE x.account_id = a AND x.expires <= p_now) THEN
            n := n + tollgate_void(a, p_now, p_limit - n);
        END IF;
        EXIT WHEN n >= p_limit OR taken >= 32;
    END LOOP;
    RETURN n;
END
$$;
