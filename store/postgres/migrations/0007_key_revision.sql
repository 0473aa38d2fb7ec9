-- Tollgate schema, version 7: key revisions, so that a key whose record changed (its
-- name or restrictions updated, its value rotated, the key revoked) is noticed by the
-- key check of the very next call, on any instance, even when that instance serves the
-- key's record from its cache.
--
-- tollgate_keys.revision counts the changes made to a key's record; every UPDATE of a
-- key made by this version's store increases it. tollgate_key_state keeps its signature
-- (tollgate_admit and tollgate_admit_batch call it, unchanged): p_hash is the key's
-- 32-byte hash, optionally followed by the revision the caller's record has, as 8 bytes
-- in big-endian order. A check with a revision reports a key whose revision differs as
-- unknown (1), so that the caller reads it again; a check with the bare hash, as an
-- instance of an earlier version sends it during a rolling upgrade, is judged as
-- before. A revoked key is reported revoked (2) whatever its revision.

ALTER TABLE tollgate_keys ADD COLUMN revision bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION tollgate_key_state(p_account text, p_key_id text, p_hash bytea) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    k record;
BEGIN
    IF coalesce(p_key_id, '') = '' THEN
        IF EXISTS (SELECT 1 FROM tollgate_accounts a WHERE a.id = p_account) THEN
            RETURN 0;
        END IF;
        RETURN 1;
    END IF;
    IF length(p_hash) NOT IN (32, 40) THEN
        RETURN 1;
    END IF;
    SELECT x.account_id, x.hash, x.revoked_at, x.revision INTO k FROM tollgate_keys x WHERE x.id = p_key_id;
    IF NOT FOUND OR k.account_id <> p_account OR k.hash <> substring(p_hash FROM 1 FOR 32) THEN
        RETURN 1;
    END IF;
    IF k.revoked_at IS NOT NULL THEN
        RETURN 2;
    END IF;
    IF length(p_hash) = 40
       AND k.revision <> ('x' || encode(substring(p_hash FROM 33 FOR 8), 'hex'))::bit(64)::bigint THEN
        RETURN 1;
    END IF;
    RETURN 0;
END
$$;
