-- Tollgate schema, version 3: redeeming an authorization code twice revokes its
-- approval in the same step (oauthstore.Store.RedeemCode), and redemptions lock in the
-- documented order, the approval before its code.
--
-- Version 2's tollgate_oauth_redeem locked the code, then left the revocation of a
-- replayed code's approval to the caller, in a second statement that a crash or an
-- outage between the two could skip. The token endpoint now checks an exchange
-- against a plain read of the code (client, redirect URI, PKCE verifier, resource)
-- and redeems it only when every check passed, so that a replay is a second exchange
-- that would have succeeded, and the store revokes what the code issued.

-- tollgate_oauth_redeem marks a code redeemed. o_status: 0 redeemed now; 1 unknown,
-- expired, or never redeemed and of a revoked approval; 2 redeemed before, in which
-- case the approval is revoked at p_now (an earlier revocation time is kept). For 0
-- and 2 the code's and the approval's columns are filled in. The approval's row lock,
-- taken first, makes concurrent redemptions take turns: the second one finds the code
-- redeemed.
CREATE OR REPLACE FUNCTION tollgate_oauth_redeem(p_hash bytea, p_now timestamptz,
    OUT o_status int, OUT o_code tollgate_oauth_codes, OUT o_approval tollgate_oauth_approvals)
LANGUAGE plpgsql AS $$
BEGIN
    o_status := 1;
    SELECT * INTO o_approval FROM tollgate_oauth_approvals a
     WHERE a.id = (SELECT c.approval_id FROM tollgate_oauth_codes c WHERE c.hash = p_hash)
       FOR UPDATE;
    IF NOT FOUND THEN
        o_approval := NULL;
        RETURN;
    END IF;
    SELECT * INTO o_code FROM tollgate_oauth_codes c WHERE c.hash = p_hash FOR UPDATE;
    IF NOT FOUND OR o_code.expires_at <= p_now THEN
        o_code := NULL; o_approval := NULL;
        RETURN;
    END IF;
    IF o_code.redeemed THEN
        UPDATE tollgate_oauth_approvals a SET revoked_at = coalesce(a.revoked_at, p_now)
         WHERE a.id = o_approval.id
        RETURNING * INTO o_approval;
        o_status := 2;
        RETURN;
    END IF;
    IF o_approval.revoked_at IS NOT NULL THEN
        o_code := NULL; o_approval := NULL;
        RETURN;
    END IF;
    UPDATE tollgate_oauth_codes c SET redeemed = true WHERE c.hash = p_hash
    RETURNING * INTO o_code;
    o_status := 0;
END
$$;
