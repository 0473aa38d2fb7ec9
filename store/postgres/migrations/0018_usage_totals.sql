-- Tollgate schema, version 18: indexes for the totals of usage across accounts
-- (usage.Store.Totals). Queries of one account read the usage tables by their primary
-- key, which leads with the account; a query across accounts reads a range of buckets
-- of every account, from the table of the coarsest buckets that cover its range: the
-- day or hour table narrowed to the API (or the full one, to group or filter by
-- channel), or the minute table.
--
-- The BRIN indexes of version 10 summarize a table well only while its rows lie in
-- the order of their bucket. They do not stay so: hour and day rows are updated by
-- every flush until their bucket ends, and retention (Prune) frees the pages of the
-- oldest buckets, which new buckets then fill, while a BRIN summary only ever widens.
-- A btree on the bucket finds a range's rows however they lie. A bucket never changes,
-- so the updates that add to a row's figures stay heap-only where they were; a new row
-- adds one entry, at the right edge of the index, since buckets only grow.
CREATE INDEX tollgate_usage_minute_bucket ON tollgate_usage_minute (bucket);
CREATE INDEX tollgate_usage_hour_bucket ON tollgate_usage_hour (bucket);
CREATE INDEX tollgate_usage_day_bucket ON tollgate_usage_day (bucket);
CREATE INDEX tollgate_usage_hour_api_bucket ON tollgate_usage_hour_api (bucket);
CREATE INDEX tollgate_usage_day_api_bucket ON tollgate_usage_day_api (bucket);
