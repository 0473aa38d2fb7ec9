-- Counts live leases. KEYS: 1 leases. ARGV: 1 clock mode, 2 now s, 3 now ns.

--#include lib_time.lua
local s, ns = clock(ARGV[1], ARGV[2], ARGV[3])
return redis.call('ZCOUNT', KEYS[1], '(' .. fmt(micros(s, ns)), '+inf')
