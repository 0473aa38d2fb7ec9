-- Tollgate schema, version 13: the records of requests sent with an idempotency key
-- (idempotency.Store), so that a retried batch runs and charges once on any instance.
--
-- A row is found by id, the SHA-256 of the account and the client's key (never the key
-- itself), and holds the request's fingerprint (a hash), its run id, the token of the
-- claimant that holds it, its lease, its expiry and, once done, the answer. Instants
-- are Unix nanoseconds, given by the caller; nothing here reads the server's clock.
-- Each claim deletes a few rows past their expiry, so that the table holds about the
-- records of one retention.

CREATE TABLE tollgate_idempotency (
    id          bytea   NOT NULL,
    fingerprint bytea   NOT NULL,
    run         uuid    NOT NULL,
    token       uuid    NOT NULL,
    done        boolean NOT NULL DEFAULT false,
    lease       bigint  NOT NULL,
    expires     bigint  NOT NULL,
    answer      bytea,
    CONSTRAINT tollgate_idempotency_pkey PRIMARY KEY (id)
);

CREATE INDEX tollgate_idempotency_by_expiry ON tollgate_idempotency (expires);

-- tollgate_idem_claim is idempotency.Store.Claim: o_state 0 claimed, 1 running, 2 done,
-- 3 mismatch, with the record's run id and, when done, its answer. A new record is
-- inserted; one past its expiry is replaced; a running one whose lease has ended is
-- taken over (its token and lease replaced, its run id kept). The row is locked from
-- the insert's conflict on, so concurrent claims of one id are decided one at a time.
CREATE FUNCTION tollgate_idem_claim(p_id bytea, p_fingerprint bytea, p_run uuid, p_token uuid,
    p_now bigint, p_lease bigint, p_expires bigint,
    OUT o_state int, OUT o_run uuid, OUT o_answer bytea)
LANGUAGE plpgsql AS $$
DECLARE
    r tollgate_idempotency;
BEGIN
    DELETE FROM tollgate_idempotency i
     WHERE i.id IN (SELECT e.id FROM tollgate_idempotency e
                     WHERE e.expires <= p_now AND e.id <> p_id
                     ORDER BY e.expires LIMIT 8 FOR UPDATE SKIP LOCKED);
    LOOP
        INSERT INTO tollgate_idempotency AS i (id, fingerprint, run, token, lease, expires)
        VALUES (p_id, p_fingerprint, p_run, p_token, p_lease, p_expires)
        ON CONFLICT (id) DO UPDATE
           SET fingerprint = EXCLUDED.fingerprint, run = EXCLUDED.run, token = EXCLUDED.token,
               done = false, lease = EXCLUDED.lease, expires = EXCLUDED.expires, answer = NULL
         WHERE i.expires <= p_now;
        IF FOUND THEN
            o_state := 0;
            o_run := p_run;
            RETURN;
        END IF;
        SELECT * INTO r FROM tollgate_idempotency i WHERE i.id = p_id FOR UPDATE;
        EXIT WHEN FOUND; -- else it was abandoned meanwhile: insert again
    END LOOP;
    o_run := r.run;
    IF r.fingerprint <> p_fingerprint THEN
        o_state := 3;
        o_run := NULL;
    ELSIF r.done THEN
        o_state := 2;
        o_answer := r.answer;
    ELSIF r.lease > p_now THEN
        o_state := 1;
    ELSE
        UPDATE tollgate_idempotency i SET token = p_token, lease = p_lease WHERE i.id = p_id;
        o_state := 0;
    END IF;
END
$$;
