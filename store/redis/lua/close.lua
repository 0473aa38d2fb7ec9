-- Frees the slots and settles the reservations of one account's calls, each at most
-- once, in order, as if each closing ran alone; Settle runs it too, freeing nothing. It
-- is the hot path, written out for speed (see the cost notes in bench_test.go): the
-- leases and the open reservations are removed with one ZREM each, and the balance is
-- read once. A step given the caller's now (with Options.CallerClock) first voids the
-- account's reservations past their deadline (void_block.lua), when nx says one is due;
-- on the server's clock, closings leave that to admissions, balance reads and sweeps, so
-- that a closing reads no clock. A reservation that was voided stays voided: the closing
-- answers status 6 and changes nothing.
--
-- KEYS: 1 leases, 2 balance, 3 usage, 4 open reservations, then the marker of each
-- step (4 + i for step i).
--
-- ARGV: one block per step, in order:
--   1 member (request id), 2 release ('1' or empty)
--   3 refund, 4 -refund
--   5 period start us, 6 period end us, 7 allowance
--   8 retention ms, 9 open reservation TTL ms
--   10 now us (empty: the server's clock)
--   11 the number k of APIs to uncount, 12..11+k the APIs
--
-- Reply: for each step in turn, 6 values: status, then the balance (remaining, used,
-- allowance, start, end). Status 0 ok, 1 no balance, 2 refund too large, 4 unknown
-- reservation, 5 refund beyond what the balance can hold, 6 voided; with 1 and 4, the
-- balance is zeros.

local n = #KEYS - 4
local o = 0
if n == 1 then
  if ARGV[2] == '1' then redis.call('ZREM', KEYS[1], ARGV[1]) end
else
  local free = {}
  for i = 1, n do
    if ARGV[o + 2] == '1' then free[#free + 1] = ARGV[o + 1] end
    o = o + 11 + ARGV[o + 11]
  end
  if #free > 0 then redis.call('ZREM', KEYS[1], unpack(free)) end
end

-- b: the balance, read once, as the steps change it; closed: the members to remove
-- from the open set, all but those of refused settlements, which stay open.
local out, b, closed, nx = {}, nil, {}, false
o = 0
for i = 1, n do
  local marker, nu, st = KEYS[4 + i], ARGV[o + 11], 0
  repeat -- a step ends early with break
    -- The balance, renewed first if the period starts later than the stored one.
    if not b then
      b = redis.call('HMGET', KEYS[2], 'rem', 'used', 'allow', 'ps', 'pe', 'nx')
      nx = b[6] and b[6] + 0
    end
    local now = ARGV[o + 10]
    if nx and now ~= '' and nx <= now + 0 then
      -- A reservation is past its deadline: void the due ones, as a closing alone
      -- would (after the steps before left the open set), then read again.
      if #closed > 0 then
        redis.call('ZREM', KEYS[4], unpack(closed))
        closed = {}
      end
      local openK, balK, useK, base, nowus, vlimit, vttl = KEYS[4], KEYS[2], KEYS[3], string.sub(marker, 1, #marker - #ARGV[o + 1]), now + 0, 64, ARGV[o + 9]
      --#include void_block.lua
      b = redis.call('HMGET', KEYS[2], 'rem', 'used', 'allow', 'ps', 'pe', 'nx')
      nx = b[6] and b[6] + 0
    end
    if not b[4] then st = 1; break end
    local ps = ARGV[o + 5]
    if ps ~= b[4] and ps + 0 > b[4] + 0 then
      redis.call('HSET', KEYS[2], 'rem', ARGV[o + 7], 'used', '0', 'allow', ARGV[o + 7], 'ps', ps, 'pe', ARGV[o + 6])
      redis.call('DEL', KEYS[3])
      b = {ARGV[o + 7], '0', ARGV[o + 7], ps, ARGV[o + 6]}
    end

    -- The marker becomes "d" (settled), and the reservation it held, "o <amount>
    -- <period start> <APIs>", is read in the same command; XX leaves an unknown
    -- reservation unknown.
    local m = redis.call('SET', marker, 'd', 'XX', 'PX', ARGV[o + 8], 'GET')
    if not m then st = 4; break end
    if m == 'v' then
      -- Voided at its expiry: it stays voided, and nothing changes.
      redis.call('SET', marker, 'v', 'PX', ARGV[o + 9])
      st = 6
      break
    end
    local amt, rps = string.match(m, '^o (%d+) (%-?%d+)')
    -- Settled before (or an adjustment, or an admission without credits): at most
    -- once. The marker stays done, remembered for another retention.
    if not amt then break end
    local refund = ARGV[o + 3]
    if refund ~= '0' and refund + 0 > amt + 0 then
      -- Refused: the reservation is put back, open, for another open reservation TTL.
      redis.call('SET', marker, m, 'PX', ARGV[o + 9])
      st = 2
      break
    end
    -- Nothing to give back (or the reservation's period has passed): the balance is
    -- as read.
    if rps ~= b[4] or (refund == '0' and nu == '0') then break end
    -- A refund that would take the remaining credits past 2^63 - 1 is refused like
    -- one above the reservation, rather than fail the run half-way.
    local rem = redis.pcall('HINCRBY', KEYS[2], 'rem', refund)
    if type(rem) == 'table' then
      redis.call('SET', marker, m, 'PX', ARGV[o + 9])
      st = 5
      break
    end
    local used = redis.call('HINCRBY', KEYS[2], 'used', ARGV[o + 4])
    for j = o + 12, o + 11 + nu do
      local c = redis.call('HGET', KEYS[3], ARGV[j])
      if c and c + 0 > 0 then redis.call('HINCRBY', KEYS[3], ARGV[j], '-1') end
    end
    if rem < 9007199254740992 and rem > -9007199254740992 and used < 9007199254740992 and used > -9007199254740992 then
      -- The new balance is the one read, with the two counters as HINCRBY answered.
      b = {rem, used, b[3], b[4], b[5]}
    else
      b = redis.call('HMGET', KEYS[2], 'rem', 'used', 'allow', 'ps', 'pe')
      for j = 1, 5 do b[j] = b[j] or '0' end
    end
  until true
  if st ~= 2 and st ~= 5 then closed[#closed + 1] = ARGV[o + 1] end
  local r
  if st == 1 or st == 4 then
    r = {st, 0, 0, 0, 0, 0}
  else
    r = {st, b[1], b[2], b[3], b[4], b[5]}
  end
  if n == 1 then
    out = r
  else
    local b0 = (i - 1) * 6
    for k = 1, 6 do out[b0 + k] = r[k] end
  end
  o = o + 11 + nu
end
if #closed > 0 then redis.call('ZREM', KEYS[4], unpack(closed)) end
return out
