-- Replaces a webhook endpoint at the revision it was read at (see
-- WebhookStore.UpdateEndpoint): its account, creation and last success stay, its
-- revision goes up by one.
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 id, 2 the revision read, 3 the JSON of the new
-- fields. Reply: {0, the new value}, {1} no such endpoint, {2, the stored value} it
-- changed since it was read.

local v = redis.call('HGET', E, ARGV[1])
if not v then return {1} end
local e = split(v, 5)
if e[1] ~= ARGV[2] then return {2, v} end
v = string.format('%d', tonumber(e[1]) + 1) .. '\0' .. e[2] .. '\0' .. e[3] .. '\0' .. e[4] .. '\0' .. ARGV[3]
redis.call('HSET', E, ARGV[1], v)
return {0, v}
