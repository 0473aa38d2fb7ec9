-- Tollgate schema, version 8: the sessions ended before their expiry (auth.SessionStore).
-- A row lives until the session's expiry; every EndSession deletes the rows whose
-- expiry has passed, at the instant it is given. Nothing here reads the server's clock.

CREATE TABLE tollgate_ended_sessions (
    id      text        NOT NULL,
    expires timestamptz NOT NULL,
    CONSTRAINT tollgate_ended_sessions_pkey PRIMARY KEY (id)
);

CREATE INDEX tollgate_ended_sessions_by_expiry ON tollgate_ended_sessions (expires);
