-- Reads a key and its account if the key's current hash is ARGV[2]. KEYS: 1 account, 2
-- keys. ARGV: key id, hash. Reply: status, JSON, rotated, revoked, account JSON,
-- revision.

local f = redis.call('HMGET', KEYS[2], ARGV[1] .. ':h', ARGV[1] .. ':rec', ARGV[1] .. ':rot', ARGV[1] .. ':rev', ARGV[1] .. ':v')
if f[1] ~= ARGV[2] then return {1} end
local a = redis.call('GET', KEYS[1])
if not a then return {1} end
return {0, f[2], f[3] or '', f[4] or '', a, f[5] or '0'}
