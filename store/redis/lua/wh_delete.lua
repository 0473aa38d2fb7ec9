-- Deletes a webhook endpoint (see WebhookStore.DeleteEndpoint): takes it out of E and
-- A into X at once, then deletes a batch of its deliveries. The caller runs it again
-- while deliveries are left; Prune finishes what a caller left.
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 id, 2 the batch. Reply: {1 if the endpoint was
-- there (0 if it was gone or being deleted already), 1 if deliveries may be left}.

local v = redis.call('HGET', E, ARGV[1])
local found = 0
if v then
  local e = split(v, 5)
  redis.call('HDEL', E, ARGV[1])
  redis.call('ZREM', A, e[3] .. '\0' .. e[2] .. ARGV[1])
  redis.call('SADD', X, ARGV[1])
  found = 1
elseif redis.call('SISMEMBER', X, ARGV[1]) == 0 then
  return {0, 0}
end
return {found, drain(ARGV[1], tonumber(ARGV[2]))}
