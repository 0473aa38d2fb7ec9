-- Tollgate schema, version 8: the audit log's entry ids (audit.Entry.ID), the
-- idempotency token of an append that may be retried after an attempt whose outcome is
-- unknown (a timeout after the commit). An id is stored at most once; entries without one
-- (NULL, as every entry written before this version) are never deduplicated, since a
-- unique index treats NULLs as distinct.

ALTER TABLE tollgate_audit ADD COLUMN id text;

CREATE UNIQUE INDEX tollgate_audit_by_id ON tollgate_audit (id);
