-- Lists the entries of the index of expiring accounts whose score (an account's earliest
-- deadline, or earlier) has passed. KEYS: 1 the index. ARGV: 1 clock mode, 2 now s, 3
-- now ns, 4 limit. Reply: the entries.

--#include lib_time.lua
local nowus = micros(clock(ARGV[1], ARGV[2], ARGV[3]))
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', nowus), 'LIMIT', 0, ARGV[4])
