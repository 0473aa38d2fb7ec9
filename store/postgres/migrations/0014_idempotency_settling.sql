-- Tollgate schema, version 14: an idempotency record marked settling is never taken
-- over (idempotency.Store.MarkSettling).
--
-- The service marks a record settling once its batch has run and before it charges
-- it. A record still running when its lease ends was taken over by the next claim,
-- which ran the batch again under the same run id; but once the first run was charged,
-- a ledger that no longer remembered that id (one that forgets after a retention)
-- charged the second run again. A marked record whose lease has ended now answers
-- claims with state 4 (the answer is lost: it ran, and must not run again) until it
-- expires. (An instance of an earlier release reads state 4 as a claim: it runs the
-- batch again under the record's run id, as that release did for any takeover, and
-- keeps no answer. Upgrade every instance.)

ALTER TABLE tollgate_idempotency ADD COLUMN settling boolean NOT NULL DEFAULT false;

-- tollgate_idem_claim is idempotency.Store.Claim: o_state 0 claimed, 1 running, 2 done,
-- 3 mismatch, 4 answer lost, with the record's run id and, when done, its answer. A new
-- record is inserted; one past its expiry is replaced; a running one whose lease has
-- ended is taken over (its token and lease replaced, its run id kept) unless it is
-- marked settling. The row is locked from the insert's conflict on, so concurrent
-- claims of one id, and the marks of it, are decided one at a time.
CREATE OR REPLACE FUNCTION tollgate_idem_claim(p_id bytea, p_fingerprint bytea, p_run uuid, p_token uuid,
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
               done = false, settling = false, lease = EXCLUDED.lease, expires = EXCLUDED.expires,
               answer = NULL
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
    ELSIF r.settling THEN
        o_state := 4;
    ELSE
        UPDATE tollgate_idempotency i SET token = p_token, lease = p_lease WHERE i.id = p_id;
        o_state := 0;
    END IF;
END
$$;
