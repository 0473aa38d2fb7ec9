-- Replaces a live key's hash and increases its revision. KEYS: 1 keys. ARGV: key id,
-- new hash, moment. Reply: status, old hash, JSON, revision.

local f = redis.call('HMGET', KEYS[1], ARGV[1] .. ':h', ARGV[1] .. ':rec', ARGV[1] .. ':rev')
if not f[1] then return {1} end
if f[3] then return {2} end
redis.call('HSET', KEYS[1], ARGV[1] .. ':h', ARGV[2], ARGV[1] .. ':rot', ARGV[3])
local v = redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':v', 1)
return {0, f[1], f[2], tostring(v)}
