-- Takes credits, as an admission's credits part does (see admit.lua), refusing with
-- status 8, the deadline and the epoch, to open a reservation the index of expiring
-- accounts would not find. KEYS: 1 balance, 2 usage, 3 marker, 4 open reservations.
-- ARGV: 1 amount, 2 period start us, 3 period end us, 4 allowance, 5 open reservation
-- TTL ms, 6 clock mode, 7 now s, 8 now ns, 9 hold us, 10 member, 11 the markers' base,
-- 12 the claim (as admit.lua's), 13.. APIs. Reply: status and the balance
-- (with_balance), or 8, the deadline and the epoch. A reservation that takes from
-- grant lots has the marker "g <amount> <period start> <plan>[ <APIs>]", the plan
-- saying what it took from each lot (see lib_grants.lua; lib_reserve.lua opens it).

--#include lib_time.lua
--#include lib_balance.lua
--#include lib_reserve.lua
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[4], ARGV[11], ARGV[5], 64
local nowus = micros(clock(ARGV[6], ARGV[7], ARGV[8]))
local pps, ppe, pallow = ARGV[2], ARGV[3], ARGV[4]
--#include prepare.lua
if redis.call('EXISTS', KEYS[3]) == 1 then return with_balance(0, KEYS[1]) end
local rg = redis.call('HMGET', KEYS[1], 'rem', 'g')
local rem, amt = tonumber(rg[1]), tonumber(ARGV[1])
if rem + tonumber(rg[2] or '0') < amt then return with_balance(3, KEYS[1]) end
local d = nowus + ARGV[9]
local refusal, nx = index_check(KEYS[1], d, ARGV[12])
if refusal then return refusal end
local apis = {}
for i = 13, #ARGV do apis[#apis + 1] = ARGV[i] end
rem = open_reservation(KEYS[1], KEYS[2], KEYS[4], KEYS[3], ARGV[10], amt, rem, d, nx, ARGV[5], apis)
return with_balance(0, KEYS[1], fmt(rem), fmt(amt - rem))
