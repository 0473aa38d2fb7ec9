-- Records the position of a sweep of the webhooks and ends its claim, if the claim
-- holds it (see WebhookStore.RecordSweep). KEYS: those of lib_wh.lua, S (KEYS[13]) as
-- wh_sweep_claim.lua says. ARGV: 1 name, 2 the claim, 3 the position. Reply: 0
-- recorded, 1 the claim does not hold the sweep.

local S = KEYS[13]
local v = redis.call('HGET', S, ARGV[1])
if not v then return 1 end
local i = string.find(v, '\0', 1, true)
if ARGV[2] == '' or string.sub(v, 1, i - 1) ~= ARGV[2] then return 1 end
redis.call('HSET', S, ARGV[1], '\0\0' .. ARGV[3])
return 0
