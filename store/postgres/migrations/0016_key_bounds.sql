-- Tollgate schema, version 16: bounds on what an account holder can make the store keep.
--
-- tollgate_create_key stores a key if its account holds fewer than p_max keys that count
-- (live, or revoked at or after p_since): the count and the insert run under a
-- transaction-level advisory lock of the account (class 1801812339, "keys"), taken by
-- nothing else, so that creations that race are judged one after the other, each on the
-- keys the ones before it stored (every statement of a plpgsql function reads a new
-- snapshot under READ COMMITTED). It returns 0 when the key is stored, 1 when the account
-- does not exist, 2 when it holds p_max keys that count; a taken id or hash raises the
-- unique violation that the plain insert raises. p_max 0 sets no limit and takes no lock.
--
-- tollgate_keys_revoked indexes the revoked keys that a prune may delete (every key but
-- the primary keys), so that the prune of the keys revoked before an instant reads those
-- alone.

CREATE FUNCTION tollgate_create_key(p_id text, p_account text, p_name text, p_primary boolean, p_hash bytea,
    p_restrictions jsonb, p_created timestamptz, p_rotated timestamptz, p_revoked timestamptz,
    p_max int, p_since timestamptz) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    IF p_max > 0 THEN
        PERFORM pg_advisory_xact_lock(1801812339, hashtext(p_account));
        SELECT count(*) INTO n FROM (
            SELECT 1 FROM tollgate_keys k
            WHERE k.account_id = p_account AND (k.revoked_at IS NULL OR k.revoked_at >= p_since)
            LIMIT p_max) c;
        IF n >= p_max THEN
            IF NOT EXISTS (SELECT 1 FROM tollgate_accounts a WHERE a.id = p_account) THEN
                RETURN 1;
            END IF;
            RETURN 2;
        END IF;
    END IF;
    INSERT INTO tollgate_keys (id, account_id, name, is_primary, hash, restrictions, created_at, rotated_at, revoked_at)
    VALUES (p_id, p_account, p_name, p_primary, p_hash, p_restrictions, p_created, p_rotated, p_revoked);
    RETURN 0;
END
$$;

CREATE INDEX tollgate_keys_revoked ON tollgate_keys (revoked_at) WHERE revoked_at IS NOT NULL AND NOT is_primary;
