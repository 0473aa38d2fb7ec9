-- The opening of a reservation, for the plain scripts that open one (reserve.lua,
-- roll.lua; admit.lua has its own copy, written out for the hot path). It expects the
-- helpers of lib_time.lua and lib_grants.lua.

-- index_check answers whether the index of expiring accounts finds a reservation due
-- at d (Unix µs, a number): by the balance's nx or ix (an entry of the account's epoch
-- is in the index no later than either), or by claim, the epoch and the deadline of an
-- entry the caller wrote ("<epoch> <deadline>", as admit.lua's), which it then keeps
-- in ix. It returns nil and nx (a number, or nil), or, when none covers d, the reply
-- that refuses the reservation: status 8, the deadline and the epoch. It writes only
-- when it accepts the claim.
local function index_check(bal, d, claim)
  local x = redis.call('HMGET', bal, 'nx', 'ie', 'ix')
  local nx, ie, ix = x[1] and x[1] + 0, x[2] or '0', x[3] and x[3] + 0
  if not ((nx and nx <= d) or (ix and ix <= d)) then
    local ce, cs = string.match(claim, '^(%d+) (%d+)$')
    if ce ~= ie or cs + 0 > d then return {8, fmt(d), ie} end
    if not ix or cs + 0 < ix then redis.call('HSET', bal, 'ix', cs) end
  end
  return nil, nx
end

-- open_reservation takes amt credits (a number, at most what the balance holds; rem,
-- a number, is its allowance part) for the reservation of marker (its key) and member
-- (its request id), due at d, with nx as index_check returned it: the allowance first,
-- then the lots (see lib_grants.lua); counts a call of each API of apis (a list); and
-- writes the marker, for ttl ms, and the deadline. It returns what it took from the
-- allowance.
local function open_reservation(bal, use, openK, marker, member, amt, rem, d, nx, ttl, apis)
  local plan
  if rem < amt then
    plan = plan_take(bal, amt - rem)
    take_lots(bal, plan)
    redis.call('HSET', bal, 'rem', '0')
  else
    rem = amt
    redis.call('HINCRBY', bal, 'rem', fmt(-amt))
  end
  redis.call('HINCRBY', bal, 'used', fmt(amt))
  for _, api in ipairs(apis) do
    redis.call('HINCRBY', use, api, '1')
  end
  local ps = redis.call('HGET', bal, 'ps')
  local m = 'o ' .. fmt(amt) .. ' ' .. ps
  if plan then m = 'g ' .. fmt(amt) .. ' ' .. ps .. ' ' .. plan end
  if #apis > 0 then m = m .. ' ' .. table.concat(apis, '\31') end
  redis.call('SET', marker, m, 'PX', ttl)
  redis.call('ZADD', openK, fmt(d), member)
  if not nx or d < nx then redis.call('HSET', bal, 'nx', fmt(d)) end
  return rem
end
