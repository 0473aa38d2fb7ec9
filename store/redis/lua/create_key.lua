-- Stores a further key. KEYS: 1 account, 2 keys, 3 korder. ARGV: key id, hash, key JSON.

if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
if redis.call('HEXISTS', KEYS[2], ARGV[1] .. ':h') == 1 then return 2 end
redis.call('HSET', KEYS[2], ARGV[1] .. ':h', ARGV[2], ARGV[1] .. ':rec', ARGV[3])
redis.call('RPUSH', KEYS[3], ARGV[1])
return 0
