-- Tollgate schema, version 17: a claim that takes an idempotency record over runs
-- under its own run id (idempotency.Store.Claim).
--
-- A record still running when its lease ends was left by a claimant that stopped
-- before it marked the record settling, so nothing of its run was charged. The next
-- claim took it over and ran the batch again under the record's run id, which the
-- service uses as the request id of the run's reservation and concurrency slot. By then
-- the first run's reservation had expired and been voided, and a ledger that remembers
-- the id admitted the second run as a replay: it took no slot and reserved nothing, so
-- its items ran without a concurrency slot, and its settlement, refused as voided,
-- charged nothing. A takeover now gives the record the claim's run id (and the claim's
-- expiry, when it is later), so that the run has a reservation and a slot of its own.
-- (An instance of an earlier release still runs a record it takes over under the run
-- id it read; upgrade every instance.)

-- tollgate_idem_claim is idempotency.Store.Claim: o_state 0 claimed, 1 running, 2 done,
-- 3 mismatch, 4 answer lost, with the record's run id and, when done, its answer. A new
-- record is inserted; one past its expiry is replaced; a running one whose lease has
-- ended is taken over unless it is marked settling: its token, run id and lease
-- replaced by the claim's, its expiry by the claim's if that is later. The row is
-- locked from the insert's conflict on, so concurrent claims of one id, and the marks
-- of it, are decided one at a time.
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
        UPDATE tollgate_idempotency i
           SET token = p_token, run = p_run, lease = p_lease, expires = GREATEST(i.expires, p_expires)
         WHERE i.id = p_id;
        o_state := 0;
        o_run := p_run;
    END IF;
END
$$;
