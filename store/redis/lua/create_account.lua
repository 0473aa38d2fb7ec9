-- Stores an account with its primary key. KEYS: 1 account, 2 keys, 3 korder. ARGV:
-- account JSON, key id, hash, key JSON. The keys hash gets the field krev: the
-- account's revoked keys are indexed in krev from the start.

if redis.call('EXISTS', KEYS[1]) == 1 then return 2 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2] .. ':h', ARGV[3], ARGV[2] .. ':rec', ARGV[4], 'krev', '1')
redis.call('RPUSH', KEYS[3], ARGV[2])
return 0
