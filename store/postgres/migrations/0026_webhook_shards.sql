-- Tollgate schema, version 26: who disabled a webhook endpoint, and the count of an
-- endpoint's pending deliveries split into shards, so that enqueues for one endpoint
-- (the operator's, which receive every account's events) do not all wait on one row.
--
-- disabled_by (tollgate_webhook_endpoints) is who disabled an endpoint: 'account',
-- 'operator' or 'delivery' (webhook.Endpoint.DisabledBy); '' while it is enabled, and
-- for the endpoints disabled before this version. An instance of an earlier version
-- writes none ('' for its disablings; an enabling of its leaves the column as it was,
-- which the readers ignore while disabled is NULL).
--
-- Up to version 25, an endpoint's row counted its pending deliveries (pending) and its
-- last success (last_delivered), and Enqueue locked the rows of the endpoints it named
-- (FOR UPDATE) to judge the bound: every enqueue of every account waited, until it
-- committed, on the row of each operator's endpoint, and every Record wrote it. From
-- this version tollgate_webhook_endpoint_shards keeps them, in shards of the endpoint:
-- 16 for an operator's endpoint, 4 for an account's, made with the endpoint. Each
-- pending delivery is counted in one shard (its column shard); the endpoint's count is
-- the sum of its shards, its last success the latest of theirs. The columns pending
-- and last_delivered of tollgate_webhook_endpoints are kept no more: an instance of an
-- earlier version still running during a rolling upgrade reads them as they were
-- (its Pending and its LastDelivered lag until it is upgraded).
--
-- The bound (tollgate_webhook_take) is exact. An enqueue far from it (the sum of the
-- shards, read first, at most p_max - shards) locks one shard at random, counts its
-- delivery there, and reads the sum again under that lock: every other enqueue in
-- flight holds another shard, so at most shards - 1 of them have counted a delivery
-- that this read misses, and the delivery is taken if the sum, its own included, is at
-- most p_max - (shards - 1). Otherwise (near the bound) that attempt is undone (a
-- subtransaction, which releases the shard) and the enqueue locks every shard of the
-- endpoint, in their order, so that none is in flight, and reads the exact sum: the
-- delivery is taken below p_max, and dropped at it. So an endpoint never has more
-- than p_max pending deliveries by Enqueue, and an enqueue is dropped only when the
-- endpoint has p_max (Resend, which the bound does not hold, may take it past). The
-- subtransaction of the attempt far from the bound costs an xid per endpoint named:
-- at most 32 (an account's 16 and the operator's 16), within the 64 a transaction
-- keeps in shared memory. Far from the bound the enqueues of an endpoint wait on each
-- other only when they draw the same shard; near it, they wait on each other.
--
-- Locks are taken in one order: the endpoint's row first, FOR KEY SHARE (which no
-- enqueue, outcome or resend waits on, and which only the deletion's FOR UPDATE
-- excludes), then, for a Record or a Resend, its delivery, then a shard; an enqueue
-- takes the endpoints it names in the order of their ids, each with its shards (one,
-- or all in their order). No shard lock is held while another shard of the same
-- endpoint is awaited but in the order of shards, and the deletion takes the endpoint
-- before its deliveries and shards: so none waits on another in a cycle. Claim and
-- Prune still lock deliveries only, skipping those locked.
--
-- The functions keep their signatures (tollgate_webhook_create_endpoint takes
-- p_disabled_by last, with a default), so that the instances of version 25 call them
-- during a rolling upgrade, and their endpoints get their shards.

ALTER TABLE tollgate_webhook_endpoints ADD COLUMN disabled_by text NOT NULL DEFAULT '';

ALTER TABLE tollgate_webhook_deliveries ADD COLUMN shard smallint NOT NULL DEFAULT 0;

CREATE TABLE tollgate_webhook_endpoint_shards (
    endpoint_id    text COLLATE "C" NOT NULL REFERENCES tollgate_webhook_endpoints (id) ON DELETE CASCADE,
    shard          smallint NOT NULL,
    pending        int      NOT NULL DEFAULT 0 CHECK (pending >= 0),
    last_delivered bigint,
    CONSTRAINT tollgate_webhook_endpoint_shards_pkey PRIMARY KEY (endpoint_id, shard)
);

-- tollgate_webhook_shard_count is the number of shards of an endpoint of p_account.
CREATE FUNCTION tollgate_webhook_shard_count(p_account text) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_account = '' THEN 16 ELSE 4 END
$$;

-- The endpoints of version 25: their count and last success go to their first shard,
-- where their pending deliveries (shard 0) are counted.
INSERT INTO tollgate_webhook_endpoint_shards (endpoint_id, shard, pending, last_delivered)
SELECT e.id, s.shard, CASE WHEN s.shard = 0 THEN e.pending ELSE 0 END, CASE WHEN s.shard = 0 THEN e.last_delivered END
  FROM tollgate_webhook_endpoints e, generate_series(0, tollgate_webhook_shard_count(e.account_id) - 1) AS s(shard);

-- tollgate_webhook_create_endpoint (version 24's, with p_disabled_by and the shards):
-- it stores an endpoint and its shards if its account (or the operator, '') holds
-- fewer than p_max, counted under a transaction-level advisory lock of the account.
-- It returns 0 when the endpoint is stored, 2 when the account holds p_max; a taken id
-- raises the unique violation.
DROP FUNCTION tollgate_webhook_create_endpoint(text, text, text, text[], text, text, bigint, bigint, text, bigint, int);
CREATE FUNCTION tollgate_webhook_create_endpoint(p_id text, p_account text, p_url text, p_types text[],
    p_secret text, p_previous_secret text, p_previous_until bigint, p_disabled bigint, p_disabled_reason text,
    p_created bigint, p_max int, p_disabled_by text DEFAULT '') RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    PERFORM pg_advisory_xact_lock(2003133032, hashtext(p_account));
    SELECT count(*) INTO n FROM tollgate_webhook_endpoints e WHERE e.account_id = p_account;
    IF n >= p_max THEN
        RETURN 2;
    END IF;
    INSERT INTO tollgate_webhook_endpoints (id, account_id, url, types, secret, previous_secret, previous_until,
                                           disabled, disabled_reason, disabled_by, created, revision)
    VALUES (p_id, p_account, p_url, p_types, p_secret, p_previous_secret, p_previous_until,
            p_disabled, p_disabled_reason, CASE WHEN p_disabled IS NULL THEN '' ELSE p_disabled_by END, p_created, 1);
    INSERT INTO tollgate_webhook_endpoint_shards (endpoint_id, shard)
    SELECT p_id, s FROM generate_series(0, tollgate_webhook_shard_count(p_account) - 1) AS s;
    RETURN 0;
END
$$;

-- tollgate_webhook_take counts a new pending delivery of the endpoint p_endpoint, whose
-- row the caller holds FOR KEY SHARE, if it has fewer than p_max, and returns the shard
-- it is counted in; NULL when the endpoint has p_max (see the bound above).
CREATE FUNCTION tollgate_webhook_take(p_endpoint text, p_max int) RETURNS smallint
LANGUAGE plpgsql AS $$
DECLARE
    n      bigint;
    shards int;
    k      smallint;
BEGIN
    SELECT coalesce(sum(s.pending), 0), count(*) INTO n, shards
      FROM tollgate_webhook_endpoint_shards s WHERE s.endpoint_id = p_endpoint;
    IF shards = 0 THEN
        RETURN NULL; -- no endpoint has no shard; an endpoint deleted has no row to hold
    END IF;
    IF n + shards <= p_max THEN
        k := floor(random() * shards)::smallint;
        BEGIN
            UPDATE tollgate_webhook_endpoint_shards s SET pending = s.pending + 1
             WHERE s.endpoint_id = p_endpoint AND s.shard = k;
            SELECT sum(s.pending) INTO n FROM tollgate_webhook_endpoint_shards s WHERE s.endpoint_id = p_endpoint;
            IF n + shards - 1 <= p_max THEN
                RETURN k;
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'TGWNB', MESSAGE = 'near the bound';
        EXCEPTION WHEN SQLSTATE 'TGWNB' THEN
            NULL; -- undone, the shard released: count exactly below
        END;
    END IF;
    PERFORM 1 FROM tollgate_webhook_endpoint_shards s WHERE s.endpoint_id = p_endpoint ORDER BY s.shard FOR NO KEY UPDATE;
    SELECT sum(s.pending) INTO n FROM tollgate_webhook_endpoint_shards s WHERE s.endpoint_id = p_endpoint;
    IF n >= p_max THEN
        RETURN NULL;
    END IF;
    k := floor(random() * shards)::smallint;
    UPDATE tollgate_webhook_endpoint_shards s SET pending = s.pending + 1 WHERE s.endpoint_id = p_endpoint AND s.shard = k;
    RETURN k;
END
$$;

-- tollgate_webhook_enqueue is webhook.Store.Enqueue: it stores the message unless its id
-- is taken (o_fresh false, and nothing else happens), then takes the endpoints named
-- that exist, in the order of their ids, FOR KEY SHARE, gives each that has fewer than
-- p_max pending a pending delivery due at p_now, counted in a shard
-- (tollgate_webhook_take), and returns in o_dropped the others named, each once, in
-- the order given.
CREATE OR REPLACE FUNCTION tollgate_webhook_enqueue(p_id text, p_type text, p_account text, p_at bigint, p_body bytea,
    p_keep bigint, p_endpoints text[], p_now bigint, p_max int, OUT o_fresh boolean, OUT o_dropped text[])
LANGUAGE plpgsql AS $$
DECLARE
    ep    text;
    k     smallint;
    taken text[] := '{}';
BEGIN
    INSERT INTO tollgate_webhook_messages (id, type, account_id, at, body, keep)
    VALUES (p_id, p_type, p_account, p_at, p_body, p_keep)
    ON CONFLICT (id) DO NOTHING;
    o_fresh := FOUND;
    IF NOT o_fresh THEN
        RETURN;
    END IF;
    FOR ep IN SELECT e.id FROM tollgate_webhook_endpoints e WHERE e.id = ANY (p_endpoints) ORDER BY e.id FOR KEY SHARE LOOP
        k := tollgate_webhook_take(ep, p_max);
        IF k IS NOT NULL THEN
            INSERT INTO tollgate_webhook_deliveries (endpoint_id, message_id, at, state, due, enqueued, shard)
            VALUES (ep, p_id, p_at, 1, p_now, p_now, k);
            taken := taken || ep;
        END IF;
    END LOOP;
    SELECT coalesce(array_agg(u.e ORDER BY u.n), '{}') INTO o_dropped
      FROM (SELECT x.e, min(x.n) AS n FROM unnest(p_endpoints) WITH ORDINALITY AS x(e, n)
             WHERE x.e <> ALL (taken) GROUP BY x.e) u;
END
$$;

-- tollgate_webhook_record is webhook.Store.Record: it stores the outcome of a delivery
-- that the claim holds, and ends the claim. An attempt (p_at not NULL) is counted and
-- kept as the last; without one (p_at NULL: postponed, or given up unattempted) the
-- attempts and the last attempt stay. A delivery no longer pending is uncounted from
-- its shard, and a delivered one moves the shard's last_delivered up to its attempt.
-- It returns 0 when recorded, 1 when the claim no longer holds the delivery, 2 when
-- there is no such delivery.
CREATE OR REPLACE FUNCTION tollgate_webhook_record(p_endpoint text, p_message text, p_claim text, p_state smallint,
    p_due bigint, p_at bigint, p_status int, p_error text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    k smallint;
BEGIN
    PERFORM 1 FROM tollgate_webhook_endpoints e WHERE e.id = p_endpoint FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    UPDATE tollgate_webhook_deliveries d
       SET state = p_state, due = p_due, claim = NULL,
           attempts = d.attempts + CASE WHEN p_at IS NULL THEN 0 ELSE 1 END,
           last_at = coalesce(p_at, d.last_at),
           last_status = CASE WHEN p_at IS NULL THEN d.last_status ELSE p_status END,
           last_error = CASE WHEN p_at IS NULL THEN d.last_error ELSE p_error END
     WHERE d.endpoint_id = p_endpoint AND d.message_id = p_message AND d.claim = p_claim
    RETURNING d.shard INTO k;
    IF FOUND THEN
        IF p_state <> 1 THEN
            -- greatest ignores NULL: the first success sets last_delivered.
            UPDATE tollgate_webhook_endpoint_shards s
               SET pending = s.pending - 1,
                   last_delivered = CASE WHEN p_state = 2 THEN greatest(s.last_delivered, p_at) ELSE s.last_delivered END
             WHERE s.endpoint_id = p_endpoint AND s.shard = k;
        END IF;
        RETURN 0;
    END IF;
    IF EXISTS (SELECT 1 FROM tollgate_webhook_deliveries d WHERE d.endpoint_id = p_endpoint AND d.message_id = p_message) THEN
        RETURN 1;
    END IF;
    RETURN 2;
END
$$;

-- tollgate_webhook_resend is webhook.Store.Resend: it makes a delivery pending, due at
-- p_now, without a claim, counting it again in its shard if it was not pending, and
-- returns its attempts and last attempt as it leaves them; no row if there is no such
-- delivery.
CREATE OR REPLACE FUNCTION tollgate_webhook_resend(p_endpoint text, p_message text, p_now bigint)
RETURNS TABLE (o_attempts int, o_last_at bigint, o_last_status int, o_last_error text)
LANGUAGE plpgsql AS $$
DECLARE
    old smallint;
    k   smallint;
BEGIN
    PERFORM 1 FROM tollgate_webhook_endpoints e WHERE e.id = p_endpoint FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT d.state, d.shard INTO old, k FROM tollgate_webhook_deliveries d
     WHERE d.endpoint_id = p_endpoint AND d.message_id = p_message FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF old <> 1 THEN
        UPDATE tollgate_webhook_endpoint_shards s SET pending = s.pending + 1 WHERE s.endpoint_id = p_endpoint AND s.shard = k;
    END IF;
    RETURN QUERY
        UPDATE tollgate_webhook_deliveries d SET state = 1, due = p_now, claim = NULL
         WHERE d.endpoint_id = p_endpoint AND d.message_id = p_message
        RETURNING d.attempts, d.last_at, d.last_status, d.last_error;
END
$$;
