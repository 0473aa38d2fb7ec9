-- Removes entries of an account's journal (see lib_journal.lua), claimed or not; a
-- journal left with no entry is kept for a while, with its epoch, then deleted. KEYS: 1
-- the journal's hash, 2 its entries by time. ARGV: 1 how long (ms) a journal that holds
-- no entry is kept, 2... the entries' ids. Reply: how many were removed.

local n = 0
for i = 2, #ARGV do
  n = n + redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('HDEL', KEYS[1], 'e:' .. ARGV[i], 'c:' .. ARGV[i])
end
if redis.call('EXISTS', KEYS[2]) == 0 and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return n
