-- Tollgate schema, version 2: the grants of the embedded OAuth authorization server
-- (oauthstore.Store): registered clients, approvals (the grant families), authorization
-- codes and tokens. Codes and tokens are kept as the SHA-256 of their values only.
-- Nothing here reads the server's clock: every instant is passed in.
--
-- Lock order, to stay clear of deadlocks: an approval before its codes and tokens
-- (the cascades of deleting an approval take them in that order too).

CREATE TABLE tollgate_oauth_clients (
    id            text        NOT NULL,
    name          text        NOT NULL,
    redirect_uris text[]      NOT NULL,
    created_at    timestamptz NOT NULL,
    CONSTRAINT tollgate_oauth_clients_pkey PRIMARY KEY (id)
);

-- client_id has no foreign key: a client that identifies itself with a metadata
-- document URL is not stored. key_id and account_id have none either: the key store
-- may be another database.
CREATE TABLE tollgate_oauth_approvals (
    id         text        NOT NULL,
    client_id  text        NOT NULL,
    key_id     text        NOT NULL,
    account_id text        NOT NULL,
    resource   text        NOT NULL,
    scopes     text[]      NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,  -- the latest expiry of its code and tokens
    revoked_at timestamptz,
    CONSTRAINT tollgate_oauth_approvals_pkey PRIMARY KEY (id)
);

CREATE INDEX tollgate_oauth_approvals_by_client ON tollgate_oauth_approvals (client_id);
CREATE INDEX tollgate_oauth_approvals_by_expiry ON tollgate_oauth_approvals (expires_at);

CREATE TABLE tollgate_oauth_codes (
    hash         bytea       NOT NULL,
    approval_id  text        NOT NULL,
    redirect_uri text        NOT NULL,
    challenge    text        NOT NULL,
    expires_at   timestamptz NOT NULL,
    redeemed     boolean     NOT NULL DEFAULT false,
    CONSTRAINT tollgate_oauth_codes_pkey PRIMARY KEY (hash),
    CONSTRAINT tollgate_oauth_codes_approval_fkey FOREIGN KEY (approval_id)
        REFERENCES tollgate_oauth_approvals (id) ON DELETE CASCADE,
    CONSTRAINT tollgate_oauth_codes_hash_length CHECK (length(hash) = 32)
);

CREATE INDEX tollgate_oauth_codes_by_approval ON tollgate_oauth_codes (approval_id);
CREATE INDEX tollgate_oauth_codes_by_expiry ON tollgate_oauth_codes (expires_at);

CREATE TABLE tollgate_oauth_tokens (
    hash        bytea       NOT NULL,
    approval_id text        NOT NULL,
    kind        smallint    NOT NULL,  -- 1 access, 2 refresh
    expires_at  timestamptz NOT NULL,
    used        boolean     NOT NULL DEFAULT false,  -- a refresh token exchanged already
    CONSTRAINT tollgate_oauth_tokens_pkey PRIMARY KEY (hash),
    CONSTRAINT tollgate_oauth_tokens_approval_fkey FOREIGN KEY (approval_id)
        REFERENCES tollgate_oauth_approvals (id) ON DELETE CASCADE,
    CONSTRAINT tollgate_oauth_tokens_hash_length CHECK (length(hash) = 32),
    CONSTRAINT tollgate_oauth_tokens_kind CHECK (kind IN (1, 2))
);

CREATE INDEX tollgate_oauth_tokens_by_approval ON tollgate_oauth_tokens (approval_id);
CREATE INDEX tollgate_oauth_tokens_by_expiry ON tollgate_oauth_tokens (expires_at);

-- tollgate_oauth_redeem marks a code redeemed. o_status: 0 redeemed now, 1 unknown,
-- expired or of a revoked approval, 2 redeemed before. For 0 and 2 the code's and the
-- approval's columns are filled in. The code's row lock makes concurrent redemptions
-- take turns: the second one finds it redeemed.
CREATE FUNCTION tollgate_oauth_redeem(p_hash bytea, p_now timestamptz,
    OUT o_status int, OUT o_code tollgate_oauth_codes, OUT o_approval tollgate_oauth_approvals)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT * INTO o_code FROM tollgate_oauth_codes c WHERE c.hash = p_hash FOR UPDATE;
    IF NOT FOUND OR o_code.expires_at <= p_now THEN
        o_status := 1; o_code := NULL;
        RETURN;
    END IF;
    SELECT * INTO o_approval FROM tollgate_oauth_approvals a WHERE a.id = o_code.approval_id;
    IF NOT FOUND OR o_approval.revoked_at IS NOT NULL THEN
        o_status := 1; o_code := NULL; o_approval := NULL;
        RETURN;
    END IF;
    IF o_code.redeemed THEN
        o_status := 2;
        RETURN;
    END IF;
    UPDATE tollgate_oauth_codes c SET redeemed = true WHERE c.hash = p_hash;
    o_status := 0;
END
$$;

-- tollgate_oauth_rotate exchanges a live refresh token for new tokens of its approval.
-- o_status: 0 rotated, 1 unknown, not a refresh token, expired or of a revoked
-- approval, 2 used before (nothing stored). For 0 and 2 the approval's columns are
-- filled in. The approval's row lock, taken first, makes concurrent rotations of its
-- tokens take turns. A new token whose hash is taken raises a unique violation.
CREATE FUNCTION tollgate_oauth_rotate(p_old bytea, p_now timestamptz,
    p_hashes bytea[], p_kinds smallint[], p_expires timestamptz[],
    OUT o_status int, OUT o_approval tollgate_oauth_approvals)
LANGUAGE plpgsql AS $$
DECLARE
    t tollgate_oauth_tokens;
BEGIN
    o_status := 1;
    SELECT * INTO o_approval FROM tollgate_oauth_approvals a
     WHERE a.id = (SELECT x.approval_id FROM tollgate_oauth_tokens x WHERE x.hash = p_old)
       FOR UPDATE;
    IF NOT FOUND OR o_approval.revoked_at IS NOT NULL THEN
        o_approval := NULL;
        RETURN;
    END IF;
    SELECT * INTO t FROM tollgate_oauth_tokens x WHERE x.hash = p_old FOR UPDATE;
    IF NOT FOUND OR t.kind <> 2 OR t.expires_at <= p_now THEN
        o_approval := NULL;
        RETURN;
    END IF;
    IF t.used THEN
        o_status := 2;
        RETURN;
    END IF;
    UPDATE tollgate_oauth_tokens x SET used = true WHERE x.hash = p_old;
    INSERT INTO tollgate_oauth_tokens (hash, approval_id, kind, expires_at)
    SELECT n.hash, o_approval.id, n.kind, n.expires_at
      FROM unnest(p_hashes, p_kinds, p_expires) AS n(hash, kind, expires_at);
    UPDATE tollgate_oauth_approvals a
       SET expires_at = greatest(a.expires_at, (SELECT max(e) FROM unnest(p_expires) AS e))
     WHERE a.id = o_approval.id
    RETURNING * INTO o_approval;
    o_status := 0;
END
$$;
