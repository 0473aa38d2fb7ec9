-- Marks, completes or releases an idempotency record (see idem_claim.lua) that a token
-- still holds: marked, the record is settling (never taken over); completed, it is done
-- and keeps the answer; released, it is deleted, unless it is marked settling. A record
-- done, or held by another token, is left as it is.
--
-- KEYS: 1 the record. ARGV: 1 token, 2 'settling', 'complete' or 'abandon', 3 the
-- answer (complete), or the time of the mark (settling: 20 digits, as the record's
-- instants; a record past its expiry at that time is not marked). Reply: 1 if the
-- token holds the record (and it was not a marked record to release, nor an expired
-- one to mark), else 0.

local r = redis.call('HMGET', KEYS[1], 't', 'd', 's', 'e')
if r[1] ~= ARGV[1] or r[2] == '1' then return 0 end
if ARGV[2] == 'settling' then
  if r[4] <= ARGV[3] then return 0 end
  redis.call('HSET', KEYS[1], 's', '1')
elseif ARGV[2] == 'complete' then
  redis.call('HSET', KEYS[1], 'd', '1', 'a', ARGV[3])
elseif r[3] == '1' then
  return 0
else
  redis.call('DEL', KEYS[1])
end
return 1
