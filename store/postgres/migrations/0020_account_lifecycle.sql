-- Tollgate schema, version 20: the account lifecycle. An account has a state (active,
-- suspended, closed) and the moment it last changed, a billing anchor, a pending plan
-- and the moment it applies from, and a revision that every update of the account's
-- record increases; a key check compares it, so that a suspension, a closure or a plan
-- change is noticed by the very next call on any instance, even one serving the record
-- from its cache. The rows written before this version read as active, at revision 0,
-- with no anchor and no pending plan (the columns' defaults).
--
-- tollgate_accounts_by_id orders the accounts by id byte-wise (COLLATE "C"), whatever
-- the database's collation, for the listing of accounts.
--
-- tollgate_key_state keeps its signature (tollgate_admit and tollgate_admit_batch call
-- it, unchanged). p_hash may now carry, after the key's hash and revision (see version
-- 7), the revision of the account the caller's record has, as 8 more bytes in
-- big-endian order (48 bytes in all); a check with it reports an account whose
-- revision differs (or a missing account) as unknown (1), for a key or a session (whose
-- p_hash is then a zero hash, the key revision 0 and the account's revision). A check
-- of 32 or 40 bytes, as an instance of an earlier version sends it during a rolling
-- upgrade, is judged as before.

ALTER TABLE tollgate_accounts
    ADD COLUMN state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'suspended', 'closed')),
    ADD COLUMN state_changed_at timestamptz,
    ADD COLUMN billing_anchor timestamptz,
    ADD COLUMN pending_plan text NOT NULL DEFAULT '',
    ADD COLUMN pending_plan_at timestamptz,
    ADD COLUMN revision bigint NOT NULL DEFAULT 0;

CREATE INDEX tollgate_accounts_by_id ON tollgate_accounts (id COLLATE "C");

CREATE OR REPLACE FUNCTION tollgate_key_state(p_account text, p_key_id text, p_hash bytea) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    k record;
    arev bigint;
BEGIN
    IF coalesce(p_key_id, '') = '' THEN
        SELECT a.revision INTO arev FROM tollgate_accounts a WHERE a.id = p_account;
        IF NOT FOUND OR length(p_hash) = 48
           AND arev <> ('x' || encode(substring(p_hash FROM 41 FOR 8), 'hex'))::bit(64)::bigint THEN
            RETURN 1;
        END IF;
        RETURN 0;
    END IF;
    IF length(p_hash) NOT IN (32, 40, 48) THEN
        RETURN 1;
    END IF;
    SELECT x.account_id, x.hash, x.revoked_at, x.revision, a.revision AS arev INTO k
      FROM tollgate_keys x JOIN tollgate_accounts a ON a.id = x.account_id
     WHERE x.id = p_key_id;
    IF NOT FOUND OR k.account_id <> p_account OR k.hash <> substring(p_hash FROM 1 FOR 32) THEN
        RETURN 1;
    END IF;
    IF length(p_hash) = 48
       AND k.arev <> ('x' || encode(substring(p_hash FROM 41 FOR 8), 'hex'))::bit(64)::bigint THEN
        RETURN 1;
    END IF;
    IF k.revoked_at IS NOT NULL THEN
        RETURN 2;
    END IF;
    IF length(p_hash) >= 40
       AND k.revision <> ('x' || encode(substring(p_hash FROM 33 FOR 8), 'hex'))::bit(64)::bigint THEN
        RETURN 1;
    END IF;
    RETURN 0;
END
$$;

-- tollgate_delete_account deletes a closed account and its keys. It locks the account's
-- row first (FOR UPDATE conflicts with the key share lock that the insert of a key of
-- the account takes for its foreign key), so that a key created concurrently is either
-- committed before, and deleted with the others (every statement of a plpgsql function
-- reads a new snapshot under READ COMMITTED), or refused after, its account gone. It
-- returns 0 when the account is deleted, 1 when there is none, 2 when it is not closed.
CREATE FUNCTION tollgate_delete_account(p_id text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    st text;
BEGIN
    SELECT a.state INTO st FROM tollgate_accounts a WHERE a.id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 1;
    END IF;
    IF st <> 'closed' THEN
        RETURN 2;
    END IF;
    DELETE FROM tollgate_keys k WHERE k.account_id = p_id;
    DELETE FROM tollgate_accounts a WHERE a.id = p_id;
    RETURN 0;
END
$$;
