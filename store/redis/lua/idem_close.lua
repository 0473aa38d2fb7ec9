-- Completes or releases an idempotency record (see idem_claim.lua) that a token still
-- holds: with an answer, the record is done and keeps it; without, it is deleted. A
-- record done, or held by another token, is left as it is.
--
-- KEYS: 1 the record. ARGV: 1 token, 2 '1' to complete ('' to release), 3 the answer.
-- Reply: 1 if the record changed, else 0.

local r = redis.call('HMGET', KEYS[1], 't', 'd')
if r[1] ~= ARGV[1] or r[2] == '1' then return 0 end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'd', '1', 'a', ARGV[3])
else
  redis.call('DEL', KEYS[1])
end
return 1
