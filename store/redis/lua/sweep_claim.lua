-- Claims a shard of the index of expiring accounts for a sweep, and lists its entries
-- whose score (an account's earliest deadline, or earlier) has passed. The claim is a
-- lease: the shard's lease key holds the sweeper's token for ARGV[6] ms, so that
-- another instance's sweep leaves the shard to this one meanwhile; a sweeper renews its
-- own lease. KEYS: 1 the shard, 2 its lease. ARGV: 1 clock mode, 2 now s, 3 now ns, 4
-- limit, 5 the sweeper's token, 6 the lease ms. Reply: false if another sweeper holds
-- the lease, the entries otherwise.

--#include lib_time.lua
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[5] then return false end
redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])
local nowus = micros(clock(ARGV[1], ARGV[2], ARGV[3]))
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', nowus), 'LIMIT', 0, ARGV[4])
