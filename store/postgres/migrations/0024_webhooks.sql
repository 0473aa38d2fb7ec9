-- Tollgate schema, version 24: the webhook endpoints and the outbox (webhook.Store),
-- shared by every instance, so that any instance delivers what another enqueued.
--
-- Instants are Unix nanoseconds, given by the caller; nothing here reads the server's
-- clock. A zero instant that may be one is NULL, but a message's Keep, which is -1 for
-- none, so that "keep < before" holds for it. Ids are compared byte-wise (COLLATE "C"),
-- as every store orders them.
--
-- tollgate_webhook_endpoints holds each endpoint with its revision, when an attempt
-- to it last succeeded (last_delivered, which only Record sets, with the outcome) and
-- the number of its pending deliveries (pending), which Enqueue, Record, Resend and
-- the deletion keep up to date under the endpoint's row lock: the bound on pending
-- deliveries is judged on it, and Pending sums it. tollgate_webhook_messages holds each message once, by id;
-- tollgate_webhook_deliveries each message's delivery to each endpoint: its state (1
-- pending, 2 delivered, 3 failed), attempts, next due time (for a pending one: when it
-- may be attempted, or when the lease of its claim ends), claim, last attempt and when
-- it was enqueued, with the message's time (at) for the listing's order.
--
-- Locks are taken in one order: the endpoint first, then its deliveries. Enqueue locks
-- the endpoints it names, in the order of their ids, then inserts; Record, Resend and
-- the deletion lock the endpoint, then the delivery (or all of them); Claim and Prune
-- lock deliveries only, skipping those locked (SKIP LOCKED), so they wait on nobody.
-- So no two of them wait on each other in a cycle.

CREATE TABLE tollgate_webhook_endpoints (
    id              text COLLATE "C" NOT NULL,
    account_id      text COLLATE "C" NOT NULL, -- '' for the operator's
    url             text   NOT NULL,
    types           text[] NOT NULL,
    secret          text   NOT NULL,
    previous_secret text   NOT NULL,
    previous_until  bigint,
    disabled        bigint,
    disabled_reason text   NOT NULL,
    created         bigint NOT NULL,
    revision        bigint NOT NULL,
    last_delivered  bigint,
    pending         int    NOT NULL DEFAULT 0 CHECK (pending >= 0),
    CONSTRAINT tollgate_webhook_endpoints_pkey PRIMARY KEY (id)
);

-- Endpoints (an account's, oldest first) and the count of the bound.
CREATE INDEX tollgate_webhook_endpoints_by_account ON tollgate_webhook_endpoints (account_id, created, id);

CREATE TABLE tollgate_webhook_messages (
    id         text COLLATE "C" NOT NULL,
    type       text   NOT NULL,
    account_id text   NOT NULL,
    at         bigint NOT NULL,
    body       bytea  NOT NULL,
    keep       bigint NOT NULL,
    CONSTRAINT tollgate_webhook_messages_pkey PRIMARY KEY (id)
);

-- The prune of the messages past their Keep.
CREATE INDEX tollgate_webhook_messages_by_keep ON tollgate_webhook_messages (keep);

CREATE TABLE tollgate_webhook_deliveries (
    endpoint_id text COLLATE "C" NOT NULL REFERENCES tollgate_webhook_endpoints (id) ON DELETE CASCADE,
    message_id  text COLLATE "C" NOT NULL REFERENCES tollgate_webhook_messages (id),
    at          bigint   NOT NULL,
    state       smallint NOT NULL CHECK (state IN (1, 2, 3)),
    attempts    int      NOT NULL DEFAULT 0,
    due         bigint,
    claim       text,
    last_at     bigint,
    last_status int      NOT NULL DEFAULT 0,
    last_error  text     NOT NULL DEFAULT '',
    enqueued    bigint   NOT NULL,
    CONSTRAINT tollgate_webhook_deliveries_pkey PRIMARY KEY (endpoint_id, message_id),
    CONSTRAINT tollgate_webhook_deliveries_due CHECK ((state = 1) = (due IS NOT NULL))
);

-- Claim: the pending deliveries by due time.
CREATE INDEX tollgate_webhook_deliveries_due ON tollgate_webhook_deliveries (due) WHERE state = 1;
-- Deliveries: an endpoint's, newest message first.
CREATE INDEX tollgate_webhook_deliveries_list ON tollgate_webhook_deliveries (endpoint_id, at, message_id);
-- Prune: the finished deliveries by their last attempt.
CREATE INDEX tollgate_webhook_deliveries_done ON tollgate_webhook_deliveries ((coalesce(last_at, enqueued))) WHERE state <> 1;
-- Whether a message has deliveries left (the prune of messages, the foreign key).
CREATE INDEX tollgate_webhook_deliveries_by_message ON tollgate_webhook_deliveries (message_id);

-- tollgate_webhook_create_endpoint stores an endpoint if its account (or the operator,
-- '') holds fewer than p_max: the count and the insert run under a transaction-level
-- advisory lock of the account (class 2003133032, "webh"), taken by nothing else, so
-- that creations that race are judged one after the other. It returns 0 when the
-- endpoint is stored, 2 when the account holds p_max; a taken id raises the unique
-- violation.
CREATE FUNCTION tollgate_webhook_create_endpoint(p_id text, p_account text, p_url text, p_types text[],
    p_secret text, p_previous_secret text, p_previous_until bigint, p_disabled bigint, p_disabled_reason text,
    p_created bigint, p_max int) RETURNS int
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
                                           disabled, disabled_reason, created, revision)
    VALUES (p_id, p_account, p_url, p_types, p_secret, p_previous_secret, p_previous_until,
            p_disabled, p_disabled_reason, p_created, 1);
    RETURN 0;
END
$$;

-- tollgate_webhook_delete_endpoint locks an endpoint, deletes its deliveries, then the
-- endpoint, and returns whether there was one.
CREATE FUNCTION tollgate_webhook_delete_endpoint(p_id text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM tollgate_webhook_endpoints e WHERE e.id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM tollgate_webhook_deliveries d WHERE d.endpoint_id = p_id;
    DELETE FROM tollgate_webhook_endpoints e WHERE e.id = p_id;
    RETURN true;
END
$$;

-- tollgate_webhook_enqueue is webhook.Store.Enqueue: it stores the message unless its id
-- is taken (o_fresh false, and nothing else happens), then locks the endpoints named
-- that exist, in the order of their ids, raises the pending count of those with fewer
-- than p_max pending, gives each of them a pending delivery due at p_now, and returns in
-- o_dropped the others named, each once, in the order given.
CREATE FUNCTION tollgate_webhook_enqueue(p_id text, p_type text, p_account text, p_at bigint, p_body bytea,
    p_keep bigint, p_endpoints text[], p_now bigint, p_max int, OUT o_fresh boolean, OUT o_dropped text[])
LANGUAGE plpgsql AS $$
DECLARE
    taken text[];
BEGIN
    INSERT INTO tollgate_webhook_messages (id, type, account_id, at, body, keep)
    VALUES (p_id, p_type, p_account, p_at, p_body, p_keep)
    ON CONFLICT (id) DO NOTHING;
    o_fresh := FOUND;
    IF NOT o_fresh THEN
        RETURN;
    END IF;
    PERFORM 1 FROM tollgate_webhook_endpoints e WHERE e.id = ANY (p_endpoints) ORDER BY e.id FOR UPDATE;
    WITH room AS (
        UPDATE tollgate_webhook_endpoints e SET pending = e.pending + 1
         WHERE e.id = ANY (p_endpoints) AND e.pending < p_max
        RETURNING e.id)
    SELECT coalesce(array_agg(room.id), '{}') INTO taken FROM room;
    INSERT INTO tollgate_webhook_deliveries (endpoint_id, message_id, at, state, due, enqueued)
    SELECT t, p_id, p_at, 1, p_now, p_now FROM unnest(taken) AS t;
    SELECT coalesce(array_agg(u.e ORDER BY u.n), '{}') INTO o_dropped
      FROM (SELECT x.e, min(x.n) AS n FROM unnest(p_endpoints) WITH ORDINALITY AS x(e, n)
             WHERE x.e <> ALL (taken) GROUP BY x.e) u;
END
$$;

-- tollgate_webhook_record is webhook.Store.Record: it stores the outcome of a delivery
-- that the claim holds, and ends the claim. An attempt (p_at not NULL) is counted and
-- kept as the last; without one (p_at NULL: postponed, or given up unattempted) the
-- attempts and the last attempt stay. A delivery no longer pending lowers its
-- endpoint's pending count, and a delivered one moves the endpoint's last_delivered up
-- to its attempt. It returns 0 when recorded, 1 when the claim no longer holds the
-- delivery, 2 when there is no such delivery.
CREATE FUNCTION tollgate_webhook_record(p_endpoint text, p_message text, p_claim text, p_state smallint,
    p_due bigint, p_at bigint, p_status int, p_error text) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM tollgate_webhook_endpoints e WHERE e.id = p_endpoint FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    UPDATE tollgate_webhook_deliveries d
       SET state = p_state, due = p_due, claim = NULL,
           attempts = d.attempts + CASE WHEN p_at IS NULL THEN 0 ELSE 1 END,
           last_at = coalesce(p_at, d.last_at),
           last_status = CASE WHEN p_at IS NULL THEN d.last_status ELSE p_status END,
           last_error = CASE WHEN p_at IS NULL THEN d.last_error ELSE p_error END
     WHERE d.endpoint_id = p_endpoint AND d.message_id = p_message AND d.claim = p_claim;
    IF FOUND THEN
        IF p_state <> 1 THEN
            -- greatest ignores NULL: the first success sets last_delivered.
            UPDATE tollgate_webhook_endpoints e
               SET pending = e.pending - 1,
                   last_delivered = CASE WHEN p_state = 2 THEN greatest(e.last_delivered, p_at) ELSE e.last_delivered END
             WHERE e.id = p_endpoint;
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
-- p_now, without a claim, raising its endpoint's pending count if it was not pending,
-- and returns its attempts and last attempt as it leaves them; no row if there is no
-- such delivery.
CREATE FUNCTION tollgate_webhook_resend(p_endpoint text, p_message text, p_now bigint)
RETURNS TABLE (o_attempts int, o_last_at bigint, o_last_status int, o_last_error text)
LANGUAGE plpgsql AS $$
DECLARE
    old smallint;
BEGIN
    PERFORM 1 FROM tollgate_webhook_endpoints e WHERE e.id = p_endpoint FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT d.state INTO old FROM tollgate_webhook_deliveries d
     WHERE d.endpoint_id = p_endpoint AND d.message_id = p_message FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF old <> 1 THEN
        UPDATE tollgate_webhook_endpoints e SET pending = e.pending + 1 WHERE e.id = p_endpoint;
    END IF;
    RETURN QUERY
        UPDATE tollgate_webhook_deliveries d SET state = 1, due = p_now, claim = NULL
         WHERE d.endpoint_id = p_endpoint AND d.message_id = p_message
        RETURNING d.attempts, d.last_at, d.last_status, d.last_error;
END
$$;

-- tollgate_webhook_prune is webhook.Store.Prune: it deletes the finished deliveries
-- whose last attempt (or, with none, their enqueueing) was before p_before, then the
-- messages left with no delivery whose keep is before it, and returns how many
-- deliveries it deleted. A delivery locked (being resent, or deleted with its
-- endpoint) is left to the next prune.
CREATE FUNCTION tollgate_webhook_prune(p_before bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    DELETE FROM tollgate_webhook_deliveries d
     WHERE (d.endpoint_id, d.message_id) IN (
           SELECT x.endpoint_id, x.message_id FROM tollgate_webhook_deliveries x
            WHERE x.state <> 1 AND coalesce(x.last_at, x.enqueued) < p_before
              FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS n = ROW_COUNT;
    DELETE FROM tollgate_webhook_messages m
     WHERE m.keep < p_before
       AND NOT EXISTS (SELECT 1 FROM tollgate_webhook_deliveries d WHERE d.message_id = m.id);
    RETURN n;
END
$$;
