-- Changes a part of the balance (see lib_grants.lua). KEYS: 1 balance, 2 usage, 3
-- marker, 4 open reservations. ARGV: 1 amount, 2 period start us, 3 period end us, 4
-- allowance, 5 how long the adjustment is remembered, ms, 6 clock mode, 7 now s, 8 now ns, 9 the markers' base, 10
-- the voided markers' TTL ms, 11 the most remaining plus used credits may come to, 12
-- the part ('1' the allowance, '0' the grants), 13 a grant's lot (its expiry, Unix
-- microseconds; '0' never), 14 the most lots an account may hold, 15 the revision of a
-- change of the allowance. Reply: status and the balance (with_balance): 0 done (or a
-- replay, or a change of the allowance that changes nothing), 3 short, 7 past
-- ARGV[11], 9 one lot too many. KEYS 5 and 6, ARGV 16 to 21: the journal's
-- (lib_journal.lua), whose entry a replay records too; reply {10, epoch} to index the
-- account in the index of journals first.
--
-- Before its own work it brings the balance to now and to its period in the ledger's
-- order (prepare.lua), as reserve.lua and balance.lua do. A change of the allowance
-- sets the allowance of its period to ARGV[4], if the balance is of that period (a
-- balance of an earlier one was renewed to it by prepare.lua) and its revision is above
-- 'arev', the revision of the last change applied (absent for 0; renewals keep it):
-- 'rem' changes by the difference from 'allow', a decrease taking at most what is left,
-- and 'allow' and 'arev' take the change's. Otherwise nothing changes; the change is
-- remembered all the same, as a replay would change nothing.

--#include lib_time.lua
--#include lib_balance.lua
--#include lib_journal.lua
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[4], ARGV[9], ARGV[10], 64
local nowus = micros(clock(ARGV[6], ARGV[7], ARGV[8]))
local pps, ppe, pallow = ARGV[2], ARGV[3], ARGV[4]
--#include prepare.lua
local ep = journal_ready(KEYS[5], 16)
if ep then return {10, ep} end
if redis.call('EXISTS', KEYS[3]) == 1 then
  journal_record(KEYS[5], KEYS[6], 16)
  return with_balance(0, KEYS[1])
end
local amt = tonumber(ARGV[1])
local b = redis.call('HMGET', KEYS[1], 'rem', 'used', 'g', 'allow', 'ps', 'arev')
local rem, used, g = tonumber(b[1]), tonumber(b[2] or '0'), tonumber(b[3] or '0')
if ARGV[12] == '1' then
  if tonumber(b[5]) == tonumber(ARGV[2]) and tonumber(ARGV[15]) > tonumber(b[6] or '0') then
    local d = tonumber(ARGV[4]) - tonumber(b[4] or '0')
    if d > 0 and d > tonumber(ARGV[11]) - rem - used - g then return with_balance(7, KEYS[1]) end
    if d < -rem then d = -rem end
    redis.call('HINCRBY', KEYS[1], 'rem', fmt(d))
    redis.call('HSET', KEYS[1], 'allow', ARGV[4], 'arev', ARGV[15])
  end
elseif amt > 0 and amt > tonumber(ARGV[11]) - rem - used - g then
  return with_balance(7, KEYS[1])
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
journal_record(KEYS[5], KEYS[6], 16)
return with_balance(0, KEYS[1])
