-- Marks a key revoked once. KEYS: 1 keys. ARGV: key id, moment. Reply: status, hash,
-- JSON, rotated, revoked.

local f = redis.call('HMGET', KEYS[1], ARGV[1] .. ':h', ARGV[1] .. ':rec', ARGV[1] .. ':rot', ARGV[1] .. ':rev')
if not f[1] then return {1} end
local rev = f[4]
if not rev then
  rev = ARGV[2]
  redis.call('HSET', KEYS[1], ARGV[1] .. ':rev', rev)
end
return {0, f[1], f[2], f[3] or '', rev}
