-- Makes a webhook delivery pending again, due now, without a claim (see
-- WebhookStore.Resend).
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 endpoint, 2 message, 3 now. Reply: {} for no such
-- delivery, or {its field in D, its value, its message's value in M, its body}.

local ep, msg = ARGV[1], ARGV[2]
local field = ep .. '\0' .. msg
local v = redis.call('HGET', D, field)
if not v or redis.call('HEXISTS', E, ep) == 0 then return {} end
local d = dsplit(v)
if d[1] == '1' then
  redis.call('ZREM', Q, d[3] .. field)
else
  redis.call('ZREM', F, finished(d, field))
  redis.call('HINCRBY', P, ep, 1)
end
d[1], d[3], d[6] = '1', ARGV[3], ''
v = djoin(d)
redis.call('HSET', D, field, v)
redis.call('ZADD', Q, 0, d[3] .. field)
return {field, v, redis.call('HGET', M, msg), redis.call('HGET', B, msg)}
