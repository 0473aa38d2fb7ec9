-- Tollgate schema, version 28: the journal of changes (package journal), so that a
-- change of an account, a key, a plan or credits is written with the event it
-- publishes: the statement that makes the change inserts its entry into
-- tollgate_change_journal, in the same statement, when the change is made (a
-- data-modifying WITH over the change's rows or the function's status), and the
-- instance that made it deletes the entry once it has published the change. A relay on
-- every instance publishes again the entries older than its grace (Claim, then Remove).
--
-- id is the change's id (the event's), compared byte-wise; at is when the change was
-- made, on the service's clock (the relay's grace and maximum age count from it);
-- change is the change as package journal encoded it, kept as it is; claimed_until is
-- the end of the claim of the relay that holds the entry, NULL for none. Nothing here
-- reads the server's clock. Claim locks the entries it takes, skipping those another
-- claim holds locked (SKIP LOCKED), so relays wait on nobody.

CREATE TABLE tollgate_change_journal (
    id            text COLLATE "C" NOT NULL,
    at            timestamptz NOT NULL,
    change        bytea       NOT NULL,
    claimed_until timestamptz,
    CONSTRAINT tollgate_change_journal_pkey PRIMARY KEY (id)
);

CREATE INDEX tollgate_change_journal_by_at ON tollgate_change_journal (at, id);
