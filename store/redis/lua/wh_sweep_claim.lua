-- Claims a sweep of the webhooks (see WebhookStore.ClaimSweep) unless a claim within
-- its lease holds it. KEYS: those of lib_wh.lua; the sweeps are in S (KEYS[13]), a hash:
-- name -> "<claim, '' for none>\0<end of its lease>\0<position>". ARGV: 1 name, 2 the
-- new claim, 3 now, 4 the end of its lease (instants in 20 digits, which compare as
-- text). Reply: false if another claim holds the sweep, else the sweep's position.

local S = KEYS[13]
local claim, held, position = '', '', ''
local v = redis.call('HGET', S, ARGV[1])
if v then
  local i = string.find(v, '\0', 1, true)
  local j = string.find(v, '\0', i + 1, true)
  claim, held, position = string.sub(v, 1, i - 1), string.sub(v, i + 1, j - 1), string.sub(v, j + 1)
end
if claim ~= '' and ARGV[3] < held then return false end
redis.call('HSET', S, ARGV[1], ARGV[2] .. '\0' .. ARGV[4] .. '\0' .. position)
return position
