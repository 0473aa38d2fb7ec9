-- The grant lots of a balance (billing/driver.Part): the scripts that spend them, give
-- back to them, drop them or read them include these helpers. Besides its allowance
-- part 'rem', a balance hash keeps its lots as fields 'L<expires>' (Unix microseconds
-- from which what is left of the lot is gone; 'L0' never lapses) holding their
-- credits, never 0 (a spent lot's field is deleted); 'g', the credits of all its lots;
-- 'gl' and 'gn', the earliest expiry among them and its credits (absent when none
-- lapses); and 'gw', the latest now at which lapsed lots were dropped, by which every
-- lot that lapses is gone, even for a caller whose clock lags. Every value is an
-- integer below 2^53, exact as a Lua number.

local MAXC = 9007199254740991

local function gfmt(x)
  return string.format('%d', x)
end

-- lots_of returns the balance's lots, {expires, credits} as numbers, in the order calls
-- spend them: the one that lapses first first, those that never lapse last.
local function lots_of(bal)
  local h = redis.call('HGETALL', bal)
  local ls = {}
  for i = 1, #h, 2 do
    if string.byte(h[i]) == 76 then ls[#ls + 1] = {string.sub(h[i], 2) + 0, h[i + 1] + 0} end
  end
  table.sort(ls, function(a, b) return a[1] ~= 0 and (b[1] == 0 or a[1] < b[1]) end)
  return ls
end

-- lots_meta writes g, gl and gn from the lots ls, in spending order.
local function lots_meta(bal, ls)
  local g, gl, gn = 0, nil, nil
  for _, l in ipairs(ls) do
    g = g + l[2]
    if not gl and l[1] ~= 0 then gl, gn = l[1], l[2] end
  end
  if g > 0 then redis.call('HSET', bal, 'g', gfmt(g)) else redis.call('HDEL', bal, 'g') end
  if gl then redis.call('HSET', bal, 'gl', gfmt(gl), 'gn', gfmt(gn)) else redis.call('HDEL', bal, 'gl', 'gn') end
end

-- lapse_due drops the lots lapsed at nowus, or at gw if it is later, when gl says one
-- has (a nil nowus drops nothing), and moves gw to that instant.
local function lapse_due(bal, nowus)
  if not nowus then return end
  local x = redis.call('HMGET', bal, 'gl', 'gw')
  local t = nowus
  if x[2] and x[2] + 0 > t then t = x[2] + 0 end
  if not x[1] or x[1] + 0 > t then return end
  redis.call('HSET', bal, 'gw', gfmt(t))
  local keep = {}
  for _, l in ipairs(lots_of(bal)) do
    if l[1] ~= 0 and l[1] <= t then redis.call('HDEL', bal, 'L' .. gfmt(l[1])) else keep[#keep + 1] = l end
  end
  lots_meta(bal, keep)
end

-- plan_take returns what taking need credits from the lots, which hold them, takes
-- from each, in spending order: "expires:credits" joined by ','.
local function plan_take(bal, need)
  local parts = {}
  for _, l in ipairs(lots_of(bal)) do
    if need <= 0 then break end
    local c = l[2]
    if c > need then c = need end
    parts[#parts + 1] = gfmt(l[1]) .. ':' .. gfmt(c)
    need = need - c
  end
  return table.concat(parts, ',')
end

-- take_lots takes from the lots what a plan of plan_take says.
local function take_lots(bal, plan)
  for x, c in string.gmatch(plan, '(%d+):(%d+)') do
    if redis.call('HINCRBY', bal, 'L' .. x, '-' .. c) <= 0 then redis.call('HDEL', bal, 'L' .. x) end
  end
  lots_meta(bal, lots_of(bal))
end

-- give_lots gives back up to refund credits to the lots a reservation took from (its
-- plan), the last first, to each what was taken from it, unless it has lapsed at nowus
-- (nil: the caller has no clock) or gw: that part is lost; room at most in all (what
-- is above is lost too). It returns what is left of refund, for the allowance.
local function give_lots(bal, plan, refund, nowus, room)
  local ts = {}
  for x, c in string.gmatch(plan, '(%d+):(%d+)') do ts[#ts + 1] = {x, c + 0} end
  local w = redis.call('HGET', bal, 'gw')
  local t = w and w + 0 or 0
  if nowus and nowus > t then t = nowus end
  local rest, changed = refund, false
  for i = #ts, 1, -1 do
    if rest <= 0 then break end
    local x, c = ts[i][1], ts[i][2]
    if c > rest then c = rest end
    rest = rest - c
    if x == '0' or x + 0 > t then
      if c > room then c = room end
      if c > 0 then
        room = room - c
        redis.call('HINCRBY', bal, 'L' .. x, gfmt(c))
        changed = true
      end
    end
  end
  if changed then lots_meta(bal, lots_of(bal)) end
  return rest
end

-- room_of returns how many credits the balance can take before its remaining plus
-- used credits reach 2^53-1.
local function room_of(bal)
  local b = redis.call('HMGET', bal, 'rem', 'used', 'g')
  return MAXC - (b[1] or 0) - (b[2] or 0) - (b[3] or 0)
end

-- renewed returns the allowance part a renewal sets: the allowance, less what the
-- lots hold past 2^53-1 minus it.
local function renewed(bal, allowance)
  local g = redis.call('HGET', bal, 'g')
  if g and allowance + 0 > MAXC - g then return gfmt(MAXC - g) end
  return allowance
end
