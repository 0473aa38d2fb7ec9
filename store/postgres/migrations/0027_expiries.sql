-- Tollgate schema, version 27: the expiries of keys and accounts, indexed, for the
-- listing of the keys that expire (auth.KeyExpiries, which the webhooks sweep to send
-- key.expired); and the webhook store's sweeps (webhook.Store.ClaimSweep), so that the
-- instances share them.
--
-- expires_at, on tollgate_keys and tollgate_accounts, is the expiry of the row's
-- restrictions (their "expires_at"), to the microsecond (truncated: the digits past
-- the sixth are dropped before the cast, which would round them); NULL for none. A
-- trigger keeps it from the restrictions on every insert and every update of them, so
-- that the statements of every version write it, those of the versions before too
-- during a rolling upgrade. The JSON form is Go's (RFC 3339 with its zone), which the cast reads
-- the same whatever the session's settings.

CREATE FUNCTION tollgate_expiry_of(p_restrictions jsonb) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT regexp_replace(p_restrictions->>'expires_at', '(\.[0-9]{6})[0-9]+', '\1')::timestamptz
$$;

CREATE FUNCTION tollgate_set_expiry() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.expires_at := tollgate_expiry_of(NEW.restrictions);
    RETURN NEW;
END
$$;

ALTER TABLE tollgate_keys ADD COLUMN expires_at timestamptz;
ALTER TABLE tollgate_accounts ADD COLUMN expires_at timestamptz;

UPDATE tollgate_keys SET expires_at = tollgate_expiry_of(restrictions) WHERE restrictions ? 'expires_at';
UPDATE tollgate_accounts SET expires_at = tollgate_expiry_of(restrictions) WHERE restrictions ? 'expires_at';

CREATE TRIGGER tollgate_keys_expiry BEFORE INSERT OR UPDATE OF restrictions ON tollgate_keys
    FOR EACH ROW EXECUTE FUNCTION tollgate_set_expiry();
CREATE TRIGGER tollgate_accounts_expiry BEFORE INSERT OR UPDATE OF restrictions ON tollgate_accounts
    FOR EACH ROW EXECUTE FUNCTION tollgate_set_expiry();

-- The listing reads the keys of a window of expiries in the order of the listing (the
-- expiry, then the id byte-wise), and the accounts of a window, whose primary keys
-- expire with them.
CREATE INDEX tollgate_keys_by_expiry ON tollgate_keys (expires_at, id COLLATE "C") WHERE expires_at IS NOT NULL;
CREATE INDEX tollgate_accounts_by_expiry ON tollgate_accounts (expires_at) WHERE expires_at IS NOT NULL;

-- tollgate_webhook_sweeps holds each sweep of the webhooks by name: its position (the
-- sweeper's own text, '' before the first), and the claim that holds it (NULL for
-- none) until held_until (Unix nanoseconds, the caller's clock).
CREATE TABLE tollgate_webhook_sweeps (
    name       text COLLATE "C" NOT NULL,
    position   text   NOT NULL DEFAULT '',
    claim      text,
    held_until bigint,
    CONSTRAINT tollgate_webhook_sweeps_pkey PRIMARY KEY (name)
);
