-- Reads every key of an account. KEYS: 1 account, 2 keys, 3 korder. Reply: status, then
-- per key: id, hash, JSON, rotated, revoked, revision.

if redis.call('EXISTS', KEYS[1]) == 0 then return {1} end
local out = {0}
for _, id in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  local f = redis.call('HMGET', KEYS[2], id .. ':h', id .. ':rec', id .. ':rot', id .. ':rev', id .. ':v')
  out[#out + 1] = id
  for i = 1, 4 do out[#out + 1] = f[i] or '' end
  out[#out + 1] = f[5] or '0'
end
return out
