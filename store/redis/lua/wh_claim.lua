-- Claims the due webhook deliveries (see WebhookStore.Claim): up to a limit of the
-- pending deliveries due before a bound, the earliest first, each given the claim and
-- the lease's end as its due time. A delivery of an endpoint no longer in E (whose
-- deletion stopped half-way) is deleted instead.
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 now plus a nanosecond (the first due time not
-- due), 2 the lease's end, 3 the claim, 4 the limit. Reply: for each delivery claimed,
-- {its field in D, its value, its message's value in M, its body}.

local out = {}
for _, m in ipairs(redis.call('ZRANGEBYLEX', Q, '-', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]))) do
  local field = string.sub(m, 21)
  local msg = msgof(field)
  local ep = string.sub(field, 1, #field - #msg - 1)
  if redis.call('HEXISTS', E, ep) == 0 then
    whdel(ep, msg)
  else
    local d = dsplit(redis.call('HGET', D, field))
    d[3], d[6] = ARGV[2], ARGV[3]
    local v = djoin(d)
    redis.call('HSET', D, field, v)
    redis.call('ZREM', Q, m)
    redis.call('ZADD', Q, 0, ARGV[2] .. field)
    out[#out + 1] = {field, v, redis.call('HGET', M, msg), redis.call('HGET', B, msg)}
  end
end
return out
