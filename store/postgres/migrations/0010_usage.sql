-- Tollgate schema, version 10: usage statistics (usage.Store). Each call's record is
-- summed in process into a minute row per account, key, API, channel and outcome, and
-- every flush adds its rows to the three tables below in one transaction, so the hour
-- and day tables are exact sums of the minutes. A latency histogram is kept as its
-- bucket counts (bigint[], trailing zeros left out): the buckets are fixed (package
-- usage), so histograms merge by adding counts. Nothing here reads the server's clock.
-- It never holds a key value: keys are named by id.

-- tollgate_usage_hist_add adds two histograms count by count; the shorter one is
-- padded with zeros.
CREATE FUNCTION tollgate_usage_hist_add(a bigint[], b bigint[]) RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY n), '{}')
    FROM unnest(a, b) WITH ORDINALITY AS h(x, y, n)
$$;

CREATE TABLE tollgate_usage_minute (
    account_id text        NOT NULL,
    bucket     timestamptz NOT NULL,
    key_id     text        NOT NULL,
    api        text        NOT NULL,
    channel    text        NOT NULL,
    outcome    text        NOT NULL,
    calls      bigint      NOT NULL,
    credits    bigint      NOT NULL,
    latency    bigint[]    NOT NULL,
    last_at    timestamptz NOT NULL,
    CONSTRAINT tollgate_usage_minute_pkey PRIMARY KEY (account_id, bucket, key_id, api, channel, outcome)
);
CREATE TABLE tollgate_usage_hour (LIKE tollgate_usage_minute INCLUDING ALL);
CREATE TABLE tollgate_usage_day (LIKE tollgate_usage_minute INCLUDING ALL);

-- Retention deletes by bucket across accounts; rows arrive in about the order of their
-- bucket, which a BRIN index summarizes at little cost.
CREATE INDEX tollgate_usage_minute_by_bucket ON tollgate_usage_minute USING brin (bucket);
CREATE INDEX tollgate_usage_hour_by_bucket ON tollgate_usage_hour USING brin (bucket);
CREATE INDEX tollgate_usage_day_by_bucket ON tollgate_usage_day USING brin (bucket);

-- The last use of each key, raised by every flush and never pruned with the buckets.
CREATE TABLE tollgate_usage_last (
    account_id text        NOT NULL,
    key_id     text        NOT NULL,
    last_at    timestamptz NOT NULL,
    CONSTRAINT tollgate_usage_last_pkey PRIMARY KEY (account_id, key_id)
);
