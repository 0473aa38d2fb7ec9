-- Tollgate schema, version 30: sweeps that instances share, and that cost one index
-- probe when nothing is due.
--
-- tollgate_sweep (version 4) read the accounts with due reservations in the order of
-- their ids, with no index on the expiries (a scan of every open reservation, due or
-- not), and voided each with tollgate_void, which waits for the account's balance row:
-- concurrent sweeps of several instances all took the same accounts, the later ones
-- waiting for the first's transaction and then finding nothing left.
--
-- Now the due reservations are read through an index on their expiries, the earliest
-- first, and a sweep takes an account only if it can lock its balance row at once (FOR
-- UPDATE SKIP LOCKED): an account that another sweep holds (or an operation that is
-- voiding it itself) is left to it, so that concurrent sweeps void disjoint accounts
-- and never wait for each other. It still voids at most 32 accounts per call, holding
-- each as version 4 did (balance row, then every shard, then the reservation rows,
-- never waiting for a balance row), so calls wait for a sweep no longer than before.
-- tollgate_void is unchanged: each reservation is voided once (it deletes the row it
-- locked, and the unique index over 'settle', 'refund' and 'expire' entries is the
-- second guard), and never after its settlement.

CREATE INDEX tollgate_reservations_by_expiry ON tollgate_reservations (expires, account_id);

-- tollgate_sweep voids up to p_limit expired reservations of at most 32 accounts (it
-- holds no more), those whose balance rows no other transaction holds, and returns how
-- many it voided. It walks the due entries of the index one probe at a time (ORDER BY
-- ... LIMIT 1 past the last one, which the planner answers from the index whatever its
-- statistics), each probe a new snapshot: an account whose due reservations another
-- sweep voided and committed meanwhile is no longer found, and one found with nothing
-- due once locked is passed over without a void.
CREATE OR REPLACE FUNCTION tollgate_sweep(p_now bigint, p_limit int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int := 0;
    taken int := 0;
    seen text[] := '{}';
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
        SELECT x.expires, x.account_id INTO e, a FROM tollgate_reservations x
         WHERE (x.expires, x.account_id) > (e, a) AND x.expires <= p_now
         ORDER BY x.expires, x.account_id LIMIT 1;
        EXIT WHEN NOT FOUND;
        CONTINUE WHEN a = ANY (seen);
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
