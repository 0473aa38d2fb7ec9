-- Tollgate schema, version 11: narrower usage tables, so that a query grouped or
-- filtered by one dimension reads a few rows per bucket. An hour or a day of an account
-- with k keys, a APIs, c channels and o outcomes holds up to k*a*c*o rows in
-- tollgate_usage_hour and tollgate_usage_day; the tables below hold the same sums with
-- only the API (the _api tables: key_id and channel empty) or only the key (the _key
-- tables: api and channel empty) kept besides the outcome, so a month of an account's
-- usage per API per day is a*o rows a day instead of k*a*c*o. Every flush adds to them
-- in the transaction that adds to the full tables (usage.RollupBy), so they are always
-- exact sums of the full tables; queries by channel, by minute, or filtered on two
-- dimensions read the full tables.

-- tollgate_usage_hist_sum sums histograms count by count, as tollgate_usage_hist_add
-- adds two.
CREATE AGGREGATE tollgate_usage_hist_sum(bigint[]) (
    SFUNC = tollgate_usage_hist_add,
    STYPE = bigint[],
    INITCOND = '{}'
);

CREATE TABLE tollgate_usage_hour_api (LIKE tollgate_usage_hour INCLUDING ALL);
CREATE TABLE tollgate_usage_hour_key (LIKE tollgate_usage_hour INCLUDING ALL);
CREATE TABLE tollgate_usage_day_api (LIKE tollgate_usage_day INCLUDING ALL);
CREATE TABLE tollgate_usage_day_key (LIKE tollgate_usage_day INCLUDING ALL);

-- The sums of the usage recorded before this version.
INSERT INTO tollgate_usage_hour_api
SELECT account_id, bucket, '', api, '', outcome, sum(calls), sum(credits), tollgate_usage_hist_sum(latency), max(last_at)
FROM tollgate_usage_hour GROUP BY account_id, bucket, api, outcome;
INSERT INTO tollgate_usage_hour_key
SELECT account_id, bucket, key_id, '', '', outcome, sum(calls), sum(credits), tollgate_usage_hist_sum(latency), max(last_at)
FROM tollgate_usage_hour GROUP BY account_id, bucket, key_id, outcome;
INSERT INTO tollgate_usage_day_api
SELECT account_id, bucket, '', api, '', outcome, sum(calls), sum(credits), tollgate_usage_hist_sum(latency), max(last_at)
FROM tollgate_usage_day GROUP BY account_id, bucket, api, outcome;
INSERT INTO tollgate_usage_day_key
SELECT account_id, bucket, key_id, '', '', outcome, sum(calls), sum(credits), tollgate_usage_hist_sum(latency), max(last_at)
FROM tollgate_usage_day GROUP BY account_id, bucket, key_id, outcome;
