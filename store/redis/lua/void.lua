-- Voids up to ARGV[4] of an account's reservations past their deadline, for a sweep that
-- found the account in the index of expiring accounts under epoch ARGV[7] (empty: an
-- entry of no epoch), and prepares the entry that replaces it (see the package
-- documentation): if that epoch is the account's, the account moves to the next one; ix
-- becomes the earliest deadline still open (nx), which the replacing entry is written
-- at. KEYS: 1 open reservations, 2 balance, 3 usage. ARGV: 1 clock mode, 2 now s, 3 now
-- ns, 4 limit, 5 the markers' base, 6 the voided markers' TTL ms, 7 the epoch found.
-- Reply: the number voided, nx (or the empty string: no entry replaces the one found),
-- and the account's epoch.

--#include lib_time.lua
--#include lib_grants.lua
if redis.call('EXISTS', KEYS[2]) == 0 then return {0, '', '0'} end
local openK, balK, useK, base, vlimit, vttl = KEYS[1], KEYS[2], KEYS[3], ARGV[5], tonumber(ARGV[4]), ARGV[6]
local nowus = micros(clock(ARGV[1], ARGV[2], ARGV[3]))
-- The lots lapsed at now first, as every operation drops them before it voids.
lapse_due(balK, nowus)
local vupto = nowus
--#include void_block.lua
local x = redis.call('HMGET', KEYS[2], 'nx', 'ie')
local ie = x[2] or '0'
if ARGV[7] == ie then ie = fmt(redis.call('HINCRBY', KEYS[2], 'ie', 1)) end
if x[1] then
  redis.call('HSET', KEYS[2], 'ix', x[1])
else
  redis.call('HDEL', KEYS[2], 'ix')
end
return {vcount, x[1] or '', ie}
