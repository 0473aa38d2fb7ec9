-- Adds to the balance. KEYS: 1 balance, 2 usage, 3 marker, 4 open reservations. ARGV: 1
-- amount, 2 period start us, 3 period end us, 4 allowance, 5 retention ms, 6 clock mode,
-- 7 now s, 8 now ns, 9 the markers' base, 10 the voided markers' TTL ms, 11 the most
-- remaining plus used credits may come to.

--#include lib_time.lua
--#include lib_balance.lua
if not renew(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4]) then return {1} end
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[4], ARGV[9], ARGV[10], 64
local nowus = micros(clock(ARGV[6], ARGV[7], ARGV[8]))
--#include void_due.lua
if redis.call('EXISTS', KEYS[3]) == 1 then return with_balance(0, KEYS[1]) end
local amt = tonumber(ARGV[1])
local b = redis.call('HMGET', KEYS[1], 'rem', 'used')
local rem, used = tonumber(b[1]), tonumber(b[2] or '0')
if amt > 0 and amt > tonumber(ARGV[11]) - rem - used then return with_balance(7, KEYS[1]) end
if rem + amt < 0 then return with_balance(3, KEYS[1]) end
redis.call('HINCRBY', KEYS[1], 'rem', ARGV[1])
redis.call('SET', KEYS[3], 'd', 'PX', ARGV[5])
return with_balance(0, KEYS[1])
