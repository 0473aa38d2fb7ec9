-- Takes credits, as an admission's credits part does (see admit.lua), refusing with
-- status 8, the deadline and the epoch, to open a reservation the index of expiring
-- accounts would not find. KEYS: 1 balance, 2 usage, 3 marker, 4 open reservations.
-- ARGV: 1 amount, 2 -amount, 3 period start us, 4 period end us, 5 allowance, 6 open
-- reservation TTL ms, 7 clock mode, 8 now s, 9 now ns, 10 hold us, 11 member, 12 the
-- markers' base, 13 the claim (as admit.lua's), 14.. APIs. Reply: status and the
-- balance (with_balance), or 8, the deadline and the epoch. A reservation that takes
-- from grant lots has the marker "g <amount> <period start> <plan>[ <APIs>]", the
-- plan saying what it took from each lot (see lib_grants.lua).

--#include lib_time.lua
--#include lib_balance.lua
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[4], ARGV[12], ARGV[6], 64
local nowus = micros(clock(ARGV[7], ARGV[8], ARGV[9]))
local pps, ppe, pallow = ARGV[3], ARGV[4], ARGV[5]
--#include prepare.lua
if redis.call('EXISTS', KEYS[3]) == 1 then return with_balance(0, KEYS[1]) end
local rg = redis.call('HMGET', KEYS[1], 'rem', 'g')
local rem, amt = tonumber(rg[1]), tonumber(ARGV[1])
if rem + tonumber(rg[2] or '0') < amt then return with_balance(3, KEYS[1]) end
local d = nowus + ARGV[10]
local x = redis.call('HMGET', KEYS[1], 'nx', 'ie', 'ix')
local nx, ie, ix = x[1] and x[1] + 0, x[2] or '0', x[3] and x[3] + 0
if not ((nx and nx <= d) or (ix and ix <= d)) then
  local ce, cs = string.match(ARGV[13], '^(%d+) (%d+)$')
  if ce ~= ie or cs + 0 > d then return {8, fmt(d), ie} end
  if not ix or cs + 0 < ix then redis.call('HSET', KEYS[1], 'ix', cs) end
end
-- The allowance first, then the lots (see lib_grants.lua).
local plan
if rem < amt then
  plan = plan_take(KEYS[1], amt - rem)
  take_lots(KEYS[1], plan)
  redis.call('HSET', KEYS[1], 'rem', '0')
else
  rem = amt
  redis.call('HINCRBY', KEYS[1], 'rem', ARGV[2])
end
redis.call('HINCRBY', KEYS[1], 'used', ARGV[1])
local apis = {}
for i = 14, #ARGV do
  redis.call('HINCRBY', KEYS[2], ARGV[i], '1')
  apis[#apis + 1] = ARGV[i]
end
local m = 'o ' .. ARGV[1] .. ' ' .. redis.call('HGET', KEYS[1], 'ps')
if plan then m = 'g ' .. ARGV[1] .. ' ' .. redis.call('HGET', KEYS[1], 'ps') .. ' ' .. plan end
if #apis > 0 then m = m .. ' ' .. table.concat(apis, '\31') end
redis.call('SET', KEYS[3], m, 'PX', ARGV[6])
redis.call('ZADD', KEYS[4], fmt(d), ARGV[11])
if not nx or d < nx then redis.call('HSET', KEYS[1], 'nx', fmt(d)) end
return with_balance(0, KEYS[1], fmt(rem), fmt(amt - rem))
