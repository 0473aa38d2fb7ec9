-- Changes a part of the balance (see lib_grants.lua). KEYS: 1 balance, 2 usage, 3
-- marker, 4 open reservations. ARGV: 1 amount, 2 period start us, 3 period end us, 4
-- allowance, 5 how long the adjustment is remembered, ms, 6 clock mode, 7 now s, 8 now ns, 9 the markers' base, 10
-- the voided markers' TTL ms, 11 the most remaining plus used credits may come to, 12
-- the part ('1' the allowance, '0' the grants), 13 a grant's lot (its expiry, Unix
-- microseconds; '0' never), 14 the most lots an account may hold. Reply: status and the
-- balance (with_balance): 0 done (or a replay), 3 short, 7 past ARGV[11], 9 one lot
-- too many.

--#include lib_time.lua
--#include lib_balance.lua
if not renew(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4]) then return {1} end
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[4], ARGV[9], ARGV[10], 64
local nowus = micros(clock(ARGV[6], ARGV[7], ARGV[8]))
--#include void_due.lua
lapse_due(KEYS[1], nowus)
if redis.call('EXISTS', KEYS[3]) == 1 then return with_balance(0, KEYS[1]) end
local amt = tonumber(ARGV[1])
local b = redis.call('HMGET', KEYS[1], 'rem', 'used', 'g')
local rem, used, g = tonumber(b[1]), tonumber(b[2] or '0'), tonumber(b[3] or '0')
if amt > 0 and amt > tonumber(ARGV[11]) - rem - used - g then return with_balance(7, KEYS[1]) end
if ARGV[12] == '1' then
  -- The allowance part: a negative amount takes at most what is left of it.
  if amt < -rem then amt = -rem end
  redis.call('HINCRBY', KEYS[1], 'rem', fmt(amt))
elseif amt > 0 then
  local f = 'L' .. ARGV[13]
  if redis.call('HEXISTS', KEYS[1], f) == 0 and #lots_of(KEYS[1]) >= tonumber(ARGV[14]) then
    return with_balance(9, KEYS[1])
  end
  redis.call('HINCRBY', KEYS[1], f, ARGV[1])
  lots_meta(KEYS[1], lots_of(KEYS[1]))
elseif amt < 0 then
  -- Taken in the order calls spend: the allowance, then the lots.
  if rem + g < -amt then return with_balance(3, KEYS[1]) end
  if rem >= -amt then
    redis.call('HINCRBY', KEYS[1], 'rem', ARGV[1])
  else
    redis.call('HSET', KEYS[1], 'rem', '0')
    take_lots(KEYS[1], plan_take(KEYS[1], -amt - rem))
  end
end
redis.call('SET', KEYS[3], 'd', 'PX', ARGV[5])
return with_balance(0, KEYS[1])
