-- Lists a page of a webhook endpoint's deliveries, newest message first (see
-- WebhookStore.Deliveries); none for an endpoint not in E.
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 endpoint, 2 the exclusive upper bound of L's
-- members ("(" and the cursor's member, or "(" and the endpoint's id and byte 1), 3 the
-- most deliveries. Reply: for each, {its field in D, its value, its message's value in
-- M, its body}.

local ep = ARGV[1]
local out = {}
if redis.call('HEXISTS', E, ep) == 0 then return out end
for _, m in ipairs(redis.call('ZREVRANGEBYLEX', L, ARGV[2], '[' .. ep .. '\0', 'LIMIT', 0, tonumber(ARGV[3]))) do
  local msg = string.sub(m, #ep + 22)
  local field = ep .. '\0' .. msg
  out[#out + 1] = {field, redis.call('HGET', D, field), redis.call('HGET', M, msg), redis.call('HGET', B, msg)}
end
return out
