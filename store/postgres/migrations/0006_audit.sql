-- Tollgate schema, version 6: the audit log (audit.Store), one row per change made to
-- an account's keys or credits. It never holds a key value: keys are named by id, and
-- restrictions are kept in their plain JSON form, verbatim (json, not jsonb). Nothing
-- here reads the server's clock: every instant is passed in.
--
-- account_id has no foreign key: the key store may be another database, and the log
-- outlives what it records.

CREATE TABLE tollgate_audit (
    seq        bigint      GENERATED ALWAYS AS IDENTITY,
    at         timestamptz NOT NULL,
    actor      text        NOT NULL,
    action     text        NOT NULL,
    account_id text        NOT NULL,
    target     text        NOT NULL,
    before     json,
    after      json,
    credits    bigint      NOT NULL,
    addr       inet,
    reason     text        NOT NULL,
    CONSTRAINT tollgate_audit_pkey PRIMARY KEY (seq)
);

-- An account's listing, newest first, and the operator's listing of every account.
CREATE INDEX tollgate_audit_by_account ON tollgate_audit (account_id, at DESC, seq DESC);
CREATE INDEX tollgate_audit_by_time ON tollgate_audit (at DESC, seq DESC);
