-- Replaces entries a sweep found in a shard of the index of expiring accounts: for each
-- triple of arguments, it removes the entry found (unless empty) and, when the account
-- still has open reservations, writes the entry of the account's epoch at their
-- earliest deadline, or leaves that entry lower if it is already. KEYS: 1 the shard.
-- ARGV: triples of 1 the entry found, 2 the account's entry, 3 the deadline (empty:
-- none).

for i = 1, #ARGV, 3 do
  if ARGV[i] ~= '' then redis.call('ZREM', KEYS[1], ARGV[i]) end
  if ARGV[i + 2] ~= '' then redis.call('ZADD', KEYS[1], 'LT', ARGV[i + 2], ARGV[i + 1]) end
end
return 0
