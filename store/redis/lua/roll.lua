-- Settles a reservation and opens the next in its place, in one step (a roll,
-- billing/driver.Roller): the settlement as close.lua makes one (the refund given back
-- to the grant lots the reservation took from, the last first, unless they have lapsed,
-- then to the allowance if the reservation was made in the balance's period; the
-- APIs to uncount uncounted), the calls of Counts counted in that period too, then the
-- next reservation opened as reserve.lua opens one, with no APIs, taking its amount or
-- what the balance holds if that is less. Everything that could refuse the roll is
-- checked before anything is written (prepare.lua's renewal and voids aside, which any
-- reading of the balance makes).
--
-- KEYS: 1 balance, 2 usage, 3 open reservations, 4 the settled reservation's marker,
-- 5 the next reservation's marker (absent without a next reservation).
--
-- ARGV: 1 period start us, 2 period end us, 3 allowance, 4 clock mode, 5 now s, 6 now
-- ns, 7 the markers' base, 8 open reservation TTL ms, 9 retention ms, 10 refund, 11
-- the settled member (request id), 12 the APIs to uncount, joined by byte 31, 13 the
-- next amount, 14 its hold us, 15 its member, 16 the claim (as reserve.lua's), then
-- the counts, two each: 17 + 2i the API, 18 + 2i the calls.
--
-- Reply: status and the balance (with_balance, the charge kept included), then what
-- the next reservation holds and 1 for a replay (else 0); or 8, the deadline and the
-- epoch, as reserve.lua. Status 0 ok, 1 no balance ({1} alone), 2 refund above the
-- reservation, 4 unknown reservation ({4} alone), 5 a count or the remaining credits
-- would pass 2^63-1, 6 voided, 11 the next reservation's request id was used before.
-- A replay (the reservation settled before) changes nothing and answers what the next
-- reservation holds while it is open.

--#include lib_time.lua
--#include lib_balance.lua
--#include lib_reserve.lua
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[3], ARGV[7], ARGV[8], 64
local nowus = micros(clock(ARGV[4], ARGV[5], ARGV[6]))
local pps, ppe, pallow = ARGV[1], ARGV[2], ARGV[3]
--#include prepare.lua
local nextK = KEYS[5]

-- The settled reservation, by its marker: "o <amount> <period start>[ <APIs>]" or "g
-- <amount> <period start> <plan>[ <APIs>]" while it is open.
local m = redis.call('GET', KEYS[4])
local amt, rps, plan
if m then
  amt, rps = string.match(m, '^o (%d+) (%-?%d+)')
  if not amt then amt, rps, plan = string.match(m, '^g (%d+) (%-?%d+) ([%d:,]+)') end
end
if not amt then
  if not m then return {4} end
  if m == 'v' then return with_balance(6, balK) end
  -- Settled before: a replay, which answers what the next reservation still holds.
  local held = '0'
  if nextK then
    local nm = redis.call('GET', nextK)
    held = nm and string.match(nm, '^[og] (%d+)') or '0'
  end
  local r = with_balance(0, balK)
  r[#r + 1] = held
  r[#r + 1] = 1
  return r
end
amt = amt + 0
local refund = tonumber(ARGV[10])
if refund > amt then return with_balance(2, balK) end
if nextK and redis.call('EXISTS', nextK) == 1 then return with_balance(11, balK) end
local ps = redis.call('HGET', balK, 'ps')
local same = rps == ps
if same then
  -- HINCRBY would refuse a value past 2^63-1 after the script had written: refused
  -- now, with a margin for the doubles' rounding.
  local limit = 9.2e18
  if redis.call('HGET', balK, 'rem') + refund > limit then return with_balance(5, balK) end
  if #ARGV > 16 then
    local apis = {}
    for i = 17, #ARGV, 2 do apis[#apis + 1] = ARGV[i] end
    local cs = redis.call('HMGET', useK, unpack(apis))
    for i, c in ipairs(apis) do
      if (cs[i] or 0) + ARGV[16 + 2 * i] > limit then return with_balance(5, balK) end
    end
  end
end
local d, nx
if nextK then
  local refusal
  d = nowus + ARGV[14]
  refusal, nx = index_check(balK, d, ARGV[16])
  if refusal then return refusal end
end

-- The settlement. The charge kept: from the allowance first, as the refund goes to the
-- lots first.
redis.call('SET', KEYS[4], 'd', 'PX', ARGV[9])
redis.call('ZREM', openK, ARGV[11])
local took = 0
if plan then
  for _, c in string.gmatch(plan, '(%d+):(%d+)') do took = took + c end
end
local kept = amt - refund
local ca = amt - took
if kept < ca then ca = kept end
local cg = kept - ca
local rest = refund
if plan and refund > 0 then
  local room = refund
  if not same then room = room_of(balK) end
  rest = give_lots(balK, plan, refund, nowus, room)
end
if same then
  if refund > 0 then
    redis.call('HINCRBY', balK, 'rem', fmt(rest))
    redis.call('HINCRBY', balK, 'used', fmt(-refund))
  end
  for api in string.gmatch(ARGV[12], '[^\31]+') do
    local c = redis.call('HGET', useK, api)
    if c and c + 0 > 0 then redis.call('HINCRBY', useK, api, '-1') end
  end
  for i = 17, #ARGV, 2 do
    redis.call('HINCRBY', useK, ARGV[i], ARGV[i + 1])
  end
end

-- The next reservation: its amount, or what the balance holds if that is less.
local held = 0
if nextK then
  local b = redis.call('HMGET', balK, 'rem', 'g')
  local rem = tonumber(b[1])
  held = tonumber(ARGV[13])
  local have = rem + tonumber(b[2] or '0')
  if held > have then held = have end
  if held < 0 then held = 0 end
  open_reservation(balK, useK, openK, nextK, ARGV[15], held, rem, d, nx, ARGV[8], {})
end
local r = with_balance(0, balK, fmt(ca), fmt(cg))
r[#r + 1] = fmt(held)
r[#r + 1] = 0
return r
