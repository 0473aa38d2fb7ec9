-- Indexes in krev, once, the revoked keys of an account created before krev was kept
-- (its keys hash has no field krev). KEYS: 1 keys, 2 krev. ARGV: pairs of a key id and
-- the moment of its revocation (Unix µs). A key already in krev (revoked since) keeps
-- its moment. Reply: 0.

if redis.call('HEXISTS', KEYS[1], 'krev') == 1 then return 0 end
for i = 1, #ARGV, 2 do
  redis.call('ZADD', KEYS[2], 'NX', ARGV[i + 1], ARGV[i])
end
redis.call('HSET', KEYS[1], 'krev', '1')
return 0
