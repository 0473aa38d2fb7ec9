-- Marks a key revoked once, increasing its revision then. KEYS: 1 keys. ARGV: key id,
-- moment. Reply: status, hash, JSON, rotated, revoked, revision.

local f = redis.call('HMGET', KEYS[1], ARGV[1] .. ':h', ARGV[1] .. ':rec', ARGV[1] .. ':rot', ARGV[1] .. ':rev', ARGV[1] .. ':v')
if not f[1] then return {1} end
local rev, v = f[4], f[5] or '0'
if not rev then
  rev = ARGV[2]
  redis.call('HSET', KEYS[1], ARGV[1] .. ':rev', rev)
  v = tostring(redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':v', 1))
end
return {0, f[1], f[2], f[3] or '', rev, v}
