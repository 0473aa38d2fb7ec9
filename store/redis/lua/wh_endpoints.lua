-- Lists an account's webhook endpoints, oldest first (see WebhookStore.Endpoints).
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 the account. Reply: for each endpoint, {its id,
-- its value in E}.

local out = {}
for _, m in ipairs(redis.call('ZRANGEBYLEX', A, '[' .. ARGV[1] .. '\0', '(' .. ARGV[1] .. '\1')) do
  local id = string.sub(m, #ARGV[1] + 22)
  out[#out + 1] = {id, redis.call('HGET', E, id)}
end
return out
