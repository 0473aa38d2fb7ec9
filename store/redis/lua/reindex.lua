-- Replaces the entry a sweep found in the index of expiring accounts: it removes it and,
-- when the account still has open reservations, writes the entry of the account's epoch
-- at their earliest deadline, or leaves that entry lower if it is already. KEYS: 1 the
-- index. ARGV: 1 the entry found, 2 the account's entry, 3 the deadline (empty: none).

redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[1], 'LT', ARGV[3], ARGV[2]) end
return 0
