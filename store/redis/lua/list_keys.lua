-- Reads a page of an account's keys, oldest first. KEYS: 1 account, 2 keys, 3 korder.
-- ARGV: the id of the key to list after ('' to start with the oldest), the most keys
-- to read. Reply: status (0, 1 no account, 2 the account has no key ARGV[1]), then per
-- key: id, hash, JSON, rotated, revoked, revision.

if redis.call('EXISTS', KEYS[1]) == 0 then return {1} end
local first = 0
if ARGV[1] ~= '' then
  local i = redis.call('LPOS', KEYS[3], ARGV[1])
  if not i then return {2} end
  first = i + 1
end
local out = {0}
for _, id in ipairs(redis.call('LRANGE', KEYS[3], first, first + tonumber(ARGV[2]) - 1)) do
  local f = redis.call('HMGET', KEYS[2], id .. ':h', id .. ':rec', id .. ':rot', id .. ':rev', id .. ':v')
  out[#out + 1] = id
  for i = 1, 4 do out[#out + 1] = f[i] or '' end
  out[#out + 1] = f[5] or '0'
end
return out
