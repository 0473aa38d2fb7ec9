-- Claims an idempotency record (see idempotency.Store.Claim). The record is a hash: f
-- the fingerprint, r the run id, t the token of its holder, l its lease, e its expiry,
-- s '1' once marked settling, d '1' once done, a the answer. Instants are Unix
-- nanoseconds written as 20 digits, so that comparing them as strings compares the
-- instants; the caller's clock judges them. Redis deletes the record a little after its
-- expiry (ARGV[7]); until then a record past it is treated as absent. A takeover gives
-- the record the claim's token, run id and lease, and the claim's expiry if it is
-- later.
--
-- KEYS: 1 the record. ARGV: 1 fingerprint, 2 run, 3 token, 4 now, 5 lease, 6 expiry,
-- 7 the record's time to live in ms. Reply: the state (0 claimed, 1 running, 2 done,
-- 3 mismatch, 4 answer lost), then the run id, then for done the answer.

local r = redis.call('HMGET', KEYS[1], 'f', 'r', 'l', 'e', 'd', 's')
if r[1] and r[4] > ARGV[4] then
  if r[1] ~= ARGV[1] then return {3} end
  if r[5] == '1' then return {2, r[2], redis.call('HGET', KEYS[1], 'a')} end
  if r[3] > ARGV[4] then return {1, r[2]} end
  if r[6] == '1' then return {4, r[2]} end
  redis.call('HSET', KEYS[1], 't', ARGV[3], 'r', ARGV[2], 'l', ARGV[5])
  if ARGV[6] > r[4] then
    redis.call('HSET', KEYS[1], 'e', ARGV[6])
    redis.call('PEXPIRE', KEYS[1], ARGV[7])
  end
  return {0, ARGV[2]}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'f', ARGV[1], 'r', ARGV[2], 't', ARGV[3], 'l', ARGV[5], 'e', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return {0, ARGV[2]}
