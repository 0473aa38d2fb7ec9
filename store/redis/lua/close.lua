-- Frees the slots and settles the reservations of one account's calls, each at most
-- once, in order, as if each closing ran alone; Settle runs it too, freeing nothing. It
-- is the hot path, written out for speed (see the cost notes in bench_test.go): the
-- leases and the open reservations are removed with one ZREM each, and the balance is
-- read once. A step given the caller's now (with Options.CallerClock) first drops the
-- lapsed lots and voids the account's reservations past their deadline (void_block.lua),
-- when gl and nx say one is due, around a renewal in the ledger's order (see
-- prepare.lua); on the server's clock, closings leave that to admissions, balance reads
-- and sweeps, so that a closing reads no clock. A reservation that was voided stays
-- voided: the closing answers status 6 and changes nothing.
--
-- KEYS: 1 leases, 2 balance, 3 usage, 4 open reservations, then the marker of each
-- step (4 + i for step i).
--
-- ARGV: two per step, in order: 2i - 1 the member (request id), 2i the step's
-- parameters, one string of fields separated by byte 30 (read only when they differ
-- from the step's before; empty, for any step but the first, when they are the same,
-- as in admit.lua):
--   1 release ('1' or empty)
--   2 refund, 3 -refund
--   4 period start us, 5 period end us, 6 allowance
--   7 retention ms, 8 open reservation TTL ms
--   9 now us (empty: the server's clock)
--   then, after the last separator, the APIs to uncount, joined by byte 31
--
-- Reply: a step's 11 values, for a run of one step; for a run of several, a list of
-- their replies, one list of 11 values each (as in admit.lua). A step's values: status,
-- then the balance (the allowance part remaining, used, allowance, start, end, and the
-- lots' g, gl and gn), then the charge kept, from the allowance and from the lots (0
-- unless the step closed an open reservation). Status 0 ok, 1 no balance, 2 refund too
-- large, 4 unknown reservation, 5 refund beyond what the balance can hold, 6 voided;
-- with 1 and 4, the balance is zeros.
--
-- A reservation that took from grant lots (marker "g", see reserve.lua) gives a refund
-- back to them first, then to the allowance, as lib_grants.lua says; it reads the
-- server's clock then, to know which lots have lapsed, on the server's clock.

--#include lib_grants.lua
local n = #KEYS - 4
if n == 1 then
  if string.byte(ARGV[2]) == 49 then redis.call('ZREM', KEYS[1], ARGV[1]) end
else
  local free, P, rel = {}, nil, false
  for i = 1, n do
    local a = ARGV[2 * i]
    if a ~= '' and a ~= P then P = a; rel = string.byte(P) == 49 end
    if rel then free[#free + 1] = ARGV[2 * i - 1] end
  end
  if #free > 0 then redis.call('ZREM', KEYS[1], unpack(free)) end
end

-- b: the balance, read once, as the steps change it; closed: the members to remove
-- from the open set, all but those of refused settlements, which stay open. The
-- parameters in effect are read from the string P (see ARGV).
local out, b, closed, nx = {}, nil, {}, false
local P, refund, negRefund, ps, pe, allow, retention, openTTL, now, apis
for i = 1, n do
  local member, marker, st, ca, cg = ARGV[2 * i - 1], KEYS[4 + i], 0, 0, 0
  local a = ARGV[2 * i]
  if a ~= '' and a ~= P then
    P = a
    local rel
    rel, refund, negRefund, ps, pe, allow, retention, openTTL, now, apis = string.match(P,
      '^([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30(.*)$')
    if not apis then return redis.error_reply('ERR close.lua: malformed parameters') end
  end
  repeat -- a step ends early with break
    -- The balance, renewed first if the period starts later than the stored one.
    if not b then
      b = redis.call('HMGET', KEYS[2], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'g', 'gl', 'gn')
      nx = b[6] and b[6] + 0
    end
    -- In the ledger's order (billing/driver.Ledger), as a closing alone would: the
    -- lapsed lots, the voids due by a renewal's start and the renewal, the voids due now
    -- (each void after the steps before left the open set, then reading again).
    if now ~= '' and b[8] and b[8] + 0 <= now + 0 then
      lapse_due(KEYS[2], now + 0)
      b = redis.call('HMGET', KEYS[2], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'g', 'gl', 'gn')
    end
    if not b[4] then st = 1; break end
    if ps ~= b[4] and ps + 0 > b[4] + 0 then
      local upto = ps + 0
      if now ~= '' and now + 0 < upto then upto = now + 0 end
      if nx and now ~= '' and nx <= upto then
        if #closed > 0 then
          redis.call('ZREM', KEYS[4], unpack(closed))
          closed = {}
        end
        local openK, balK, useK, base, nowus, vupto, vlimit, vttl = KEYS[4], KEYS[2], KEYS[3], string.sub(marker, 1, #marker - #member), now + 0, upto, 64, openTTL
        --#include void_block.lua
        b = redis.call('HMGET', KEYS[2], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'g', 'gl', 'gn')
        nx = b[6] and b[6] + 0
      end
      local r = renewed(KEYS[2], allow)
      redis.call('HSET', KEYS[2], 'rem', r, 'used', '0', 'allow', allow, 'ps', ps, 'pe', pe)
      redis.call('DEL', KEYS[3])
      b = {r, '0', allow, ps, pe, b[6], b[7], b[8], b[9]}
    end
    if nx and now ~= '' and nx <= now + 0 then
      if #closed > 0 then
        redis.call('ZREM', KEYS[4], unpack(closed))
        closed = {}
      end
      local openK, balK, useK, base, nowus, vupto, vlimit, vttl = KEYS[4], KEYS[2], KEYS[3], string.sub(marker, 1, #marker - #member), now + 0, now + 0, 64, openTTL
      --#include void_block.lua
      b = redis.call('HMGET', KEYS[2], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'g', 'gl', 'gn')
      nx = b[6] and b[6] + 0
    end

    -- The marker becomes "d" (settled), and the reservation it held, "o <amount>
    -- <period start> <APIs>", is read in the same command; XX leaves an unknown
    -- reservation unknown.
    local m = redis.call('SET', marker, 'd', 'XX', 'PX', retention, 'GET')
    if not m then st = 4; break end
    if m == 'v' then
      -- Voided at its expiry: it stays voided, and nothing changes.
      redis.call('SET', marker, 'v', 'PX', openTTL)
      st = 6
      break
    end
    local amt, rps = string.match(m, '^o (%d+) (%-?%d+)')
    local plan
    if not amt then amt, rps, plan = string.match(m, '^g (%d+) (%-?%d+) ([%d:,]+)') end
    -- Settled before (or an adjustment, or an admission without credits): at most
    -- once. The marker stays done, remembered for another retention.
    if not amt then break end
    if refund ~= '0' and refund + 0 > amt + 0 then
      -- Refused: the reservation is put back, open, for another open reservation TTL.
      redis.call('SET', marker, m, 'PX', openTTL)
      st = 2
      break
    end
    -- The charge kept: from the allowance first, as the refund goes to the lots first.
    local took = 0
    if plan then
      for _, c in string.gmatch(plan, '(%d+):(%d+)') do took = took + c end
    end
    ca, cg = amt - took, amt - refund
    if cg < ca then ca = cg end
    cg = cg - ca
    if plan and refund ~= '0' then
      local nowus
      if now ~= '' then
        nowus = now + 0
      else
        local t = redis.call('TIME')
        nowus = t[1] * 1000000 + t[2]
      end
      local room = refund + 0
      if rps ~= b[4] then room = room_of(KEYS[2]) end
      local rest = give_lots(KEYS[2], plan, refund + 0, nowus, room)
      if rps == b[4] then
        redis.call('HINCRBY', KEYS[2], 'rem', gfmt(rest))
        redis.call('HINCRBY', KEYS[2], 'used', negRefund)
        for api in string.gmatch(apis, '[^\31]+') do
          local c = redis.call('HGET', KEYS[3], api)
          if c and c + 0 > 0 then redis.call('HINCRBY', KEYS[3], api, '-1') end
        end
      end
      b = redis.call('HMGET', KEYS[2], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'g', 'gl', 'gn')
      for j = 1, 9 do b[j] = b[j] or '0' end
      break
    end
    -- Nothing to give back (or the reservation's period has passed): the balance is
    -- as read.
    if rps ~= b[4] or (refund == '0' and apis == '') then break end
    -- A refund that would take the remaining credits past 2^63 - 1 is refused like
    -- one above the reservation, rather than fail the run half-way.
    local rem = redis.pcall('HINCRBY', KEYS[2], 'rem', refund)
    if type(rem) == 'table' then
      redis.call('SET', marker, m, 'PX', openTTL)
      st = 5
      break
    end
    local used = redis.call('HINCRBY', KEYS[2], 'used', negRefund)
    for api in string.gmatch(apis, '[^\31]+') do
      local c = redis.call('HGET', KEYS[3], api)
      if c and c + 0 > 0 then redis.call('HINCRBY', KEYS[3], api, '-1') end
    end
    if rem < 9007199254740992 and rem > -9007199254740992 and used < 9007199254740992 and used > -9007199254740992 then
      -- The new balance is the one read, with the two counters as HINCRBY answered.
      b = {rem, used, b[3], b[4], b[5], b[6], b[7], b[8], b[9]}
    else
      b = redis.call('HMGET', KEYS[2], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'g', 'gl', 'gn')
      for j = 1, 9 do b[j] = b[j] or '0' end
    end
  until true
  if st ~= 2 and st ~= 5 then closed[#closed + 1] = member end
  local r
  if st == 1 or st == 4 then
    r = {st, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
  else
    if st ~= 0 then ca, cg = 0, 0 end
    r = {st, b[1], b[2], b[3], b[4], b[5], b[7] or '0', b[8] or '0', b[9] or '0', ca, cg}
  end
  if n == 1 then out = r else out[i] = r end
end
if #closed > 0 then redis.call('ZREM', KEYS[4], unpack(closed)) end
return out
