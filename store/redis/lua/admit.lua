-- Performs the admission steps of one account, in order: for each, replay check, key
-- check, rate, slot, credits, every check before any write, exactly as if each step ran
-- alone, one after the other. It is the hot path, written out for speed (see the cost
-- notes in bench_test.go): what the steps read (the server's clock, the key records, the
-- rate timestamp, the live leases, the balance) is read once and then carried in the
-- script as each step changes it, and what the admitted steps change together (the
-- timestamp, the lease set's lifetime, the debit, the usage counts) is written once, at
-- the end; only the markers and the leases are written step by step. No step reads what
-- is written at the end, and a script is atomic, so the result is the same.
--
-- A reservation is open until its deadline, the step's now plus its hold: the marker
-- holds its amount, period and APIs, and the account's open set its deadline. The first
-- step with credits voids the account's reservations past their deadline first
-- (void_block.lua), when the balance's nx says one is due; the run then adds its
-- reservations to the open set in one ZADD, and lowers nx if one of them is due earlier.
-- A reservation opens only if the index of expiring accounts already finds the account
-- by its deadline (nx or ix is no later), or the step claims it has just been indexed
-- under the account's epoch (see the package documentation); if not, the step is refused
-- with denial 5, changing nothing, and the caller indexes the account and sends the step
-- again with its claim.
--
-- KEYS: 1 account record, 2 key records, 3 rate timestamp, 4 leases, 5 balance,
-- 6 usage, 7 open reservations, then the marker of each step (7 + i for step i).
--
-- ARGV: one block per step, in order:
--   1 clock mode ('s': the server's clock; else the caller's now, in 2 and 3)
--   2 now s, 3 now ns
--   4 member (request id)
--   5 key mode (empty: no key check, 'k' key, 's' session), 6 key id, 7 key hash and
--     revision: the hash in hexadecimal (64 digits), '/', the revision
--   8 emission interval ns of the step's events (empty: no rate; n events at once
--     are one event n intervals long), 9 window ns
--   10 ceiling (empty: no slot), 11 lease us, 12 lease set TTL ms
--   13 amount (empty: no credits), 14 period start us, 15 period end us, 16 allowance
--   17 the marker's TTL ms (an open reservation's with credits, else the retention)
--   18 the reservation's hold us
--   19 the claim ("<epoch> <score>": the caller indexed the account under that epoch
--      at that score; empty: none)
--   20 the number k of APIs, 21..20+k the APIs
--
-- Reply: for each step in turn, 16 values: status, denial, key state, rate allowed,
-- remaining, retry ns, reset ns, slot acquired, in use, then the balance: remaining and
-- used as pairs (hi, lo: hi * 10^9 + lo, see below), allowance, start, end. A step
-- refused until the account is indexed (denial 5) has the deadline (us) to index it by
-- in place of the remaining credits' hi, and the epoch to index it under in place of
-- their lo.

--#include lib_idiv.lua
-- Numbers: a string becomes a number by arithmetic (x + 0 parses it once, tonumber
-- twice), and a number sent to Redis is formatted with '%d', exact below 2^53. Credits
-- are 64-bit integers: the script carries them exactly as pairs (hi, lo), the value
-- hi * 10^9 + lo with 0 <= lo < 10^9.
local G = 1000000000

-- split reads a decimal integer as a pair.
local function split(x)
  if #x <= 15 then -- exact as a number
    local v = x + 0
    local lo = v % G
    return (v - lo) / G, lo
  end
  local neg = string.byte(x) == 45
  if neg then x = string.sub(x, 2) end
  local n, hi, lo = #x, 0, 0
  if n > 9 then
    hi, lo = string.sub(x, 1, n - 9) + 0, string.sub(x, n - 8) + 0
  else
    lo = x + 0
  end
  if not neg then return hi, lo end
  if lo == 0 then return -hi, 0 end
  return -hi - 1, G - lo
end

-- text returns a pair in decimal.
local function text(hi, lo)
  if hi > -9007199 and hi < 9007199 then return string.format('%d', hi * G + lo) end
  if hi >= 0 then return string.format('%d%09d', hi, lo) end
  if lo == 0 then return string.format('-%d000000000', -hi) end
  return string.format('-%d%09d', -hi - 1, G - lo)
end

local n = #KEYS - 7
local out = {}
-- Carried from step to step: the server's clock (srvS, srvNs, srvUs), read once; the
-- record of the key checked last (keyID, keyRec); whether the account exists (acct);
-- the rate timestamp (tatS, tatNs; none if tatS is nil) and, once a step moved it,
-- its lifetime (tatPX); the live leases zN counted at zUs (nil: to count again); the
-- lease set's lifetime to set (pexp, with GT if pexpGT; pexpN, its value once
-- needed); the balance b (allowance and period as stored), its remaining and used
-- credits as pairs; the number of steps that charged it since it was read or renewed
-- (charges), the first one's offset (first), and, from the second one, the debit
-- (chgHi, chgLo) and the usage counts by API (counts) to write.
local srvS, srvNs, srvUs
local keyID, keyRec, acct
local tatRead, tatS, tatNs, tatPX
local zN, zUs
local pexp, pexpN, pexpGT
local b, remHi, remLo, usedHi, usedLo
local charges, first, chgHi, chgLo, counts = 0, nil, 0, 0, nil
-- The open reservations to add (deadline, member pairs, written with the debit); nx as
-- stored (nxStored, a number, or false for none) and as the steps lower it (nx); the
-- index epoch (ie, a string) and the index bound (ix, a number, or false), and whether
-- a claim lowered ix (ixSet), to write at the end.
local opened, nxStored, nx, ie, ix, ixSet = {}, false, false, '0', false, false

local o = 0 -- the offset of the step's block in ARGV
for i = 1, n do
  local r = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '0', '0', '0'} -- the step's reply
  local hasRate, hasSlot, hasCredits = ARGV[o + 8] ~= '', ARGV[o + 10] ~= '', ARGV[o + 13] ~= ''
  local napis = ARGV[o + 20] + 0
  local marker = KEYS[7 + i]
  repeat -- a step ends early with break

    -- Now, for the limits: Unix seconds s, nanoseconds ns and microseconds nowus, from
    -- the server's clock (TIME answers seconds and microseconds) or the caller's.
    local s, ns, nowus
    if hasRate or hasSlot or hasCredits then
      if ARGV[o + 1] == 's' then
        if not srvS then
          local t = redis.call('TIME')
          local us = t[2] + 0
          srvS = t[1] + 0
          srvNs, srvUs = us * 1000, srvS * 1000000 + us
        end
        s, ns, nowus = srvS, srvNs, srvUs
      else
        s, ns = ARGV[o + 2] + 0, ARGV[o + 3] + 0
        nowus = s * 1000000 + idiv(ns, 1000)
      end
    end

    -- A step replayed after it was admitted is admitted again and takes nothing: each
    -- part below only reports what it reads.
    local replay = redis.call('EXISTS', marker) == 1

    -- Key: the record has this hash and is not revoked; for a session, the account
    -- exists.
    if not replay then
      local mode = ARGV[o + 5]
      if mode == 'k' then
        local id = ARGV[o + 6]
        if id ~= keyID then
          keyID, keyRec = id, redis.call('HMGET', KEYS[2], id .. ':h', id .. ':rev', id .. ':v')
        end
        local k = keyRec
        local want = ARGV[o + 7]
        if k[1] ~= string.sub(want, 1, 64) then r[2], r[3] = 1, 1; break end
        if k[2] then r[2], r[3] = 1, 2; break end
        if (k[3] or '0') ~= string.sub(want, 66) then r[2], r[3] = 1, 1; break end
      elseif mode == 's' then
        if acct == nil then acct = redis.call('EXISTS', KEYS[1]) == 1 end
        if not acct then r[2], r[3] = 1, 1; break end
      end
    end

    -- Rate, as billing.GCRA decides it, relative to now (as gcra in libRate): t is the
    -- timestamp minus now in nanoseconds, or 0 if it has passed or there is none; e is
    -- the emission interval and window Burst*e.
    local nxt
    if hasRate then
      if not tatRead then
        tatRead = true
        local v = redis.call('GET', KEYS[3])
        if v then
          local ts, tns = string.match(v, '^(%-?%d+) (%d+)$')
          if ts then tatS, tatNs = ts + 0, tns + 0 end
        end
      end
      local e, window = ARGV[o + 8] + 0, ARGV[o + 9] + 0
      local t = 0
      if tatS then
        t = (tatS - s) * 1000000000 + (tatNs - ns)
        if t < 0 then t = 0 end
      end
      if replay then
        r[4], r[7] = 1, t
        if t <= window then r[5] = idiv(window - t, e) end
      else
        nxt = t + e
        if nxt > window then r[2], r[6], r[7] = 2, nxt - window, t; break end
        r[4], r[5], r[7] = 1, idiv(window - nxt, e), nxt
      end
    end

    -- Slot: count the live leases (ending after now); only a full set is pruned and
    -- asked whether this request holds a lease already, so the common case reads once.
    local nl
    if hasSlot then
      if zUs ~= nowus then
        zN, zUs = redis.call('ZCOUNT', KEYS[4], string.format('(%d', nowus), '+inf'), nowus
      end
      nl = zN
      if not replay then
        local ceiling = ARGV[o + 10] + 0
        if nl >= ceiling then
          redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', string.format('%d', nowus))
          nl = redis.call('ZCARD', KEYS[4])
          zN = nl
          if not redis.call('ZSCORE', KEYS[4], ARGV[o + 4]) then
            if nl >= ceiling then r[2], r[9] = 3, nl; break end
            nl = nl + 1
          end
        else
          nl = nl + 1
        end
      end
      r[8], r[9] = 1, nl
    end

    -- Credits: renewed first if the step's period starts later than the stored one
    -- (equal strings are the common case and need no parsing).
    local amtHi, amtLo, nuHi, nuLo, dl
    if hasCredits then
      if not b then
        b = redis.call('HMGET', KEYS[5], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'ie', 'ix')
        nxStored = b[6] and b[6] + 0
        nx, ie, ix = nxStored, b[7] or '0', b[8] and b[8] + 0
        if b[4] then
          remHi, remLo = split(b[1] or '0')
          usedHi, usedLo = split(b[2] or '0')
        end
      end
      if nx and nx <= nowus and b[4] then
        -- A reservation is past its deadline: write what the steps before changed,
        -- void the due ones, and read the balance again, as a step alone would.
        --#include flush_credits.lua
        local openK, balK, useK, base, vlimit, vttl = KEYS[7], KEYS[5], KEYS[6], string.sub(marker, 1, #marker - #ARGV[o + 4]), 64, ARGV[o + 17]
        --#include void_block.lua
        b = redis.call('HMGET', KEYS[5], 'rem', 'used', 'allow', 'ps', 'pe', 'nx')
        nxStored = b[6] and b[6] + 0
        nx = nxStored
        remHi, remLo = split(b[1] or '0')
        usedHi, usedLo = split(b[2] or '0')
      end
      if not b[4] then r[1] = 1; break end
      local ps = ARGV[o + 14]
      if ps ~= b[4] and ps + 0 > b[4] + 0 then
        local allow = ARGV[o + 16]
        redis.call('HSET', KEYS[5], 'rem', allow, 'used', '0', 'allow', allow, 'ps', ps, 'pe', ARGV[o + 15])
        redis.call('DEL', KEYS[6])
        -- The renewal overwrites the debit and the usage counts of the steps before.
        b = {allow, '0', allow, ps, ARGV[o + 15]}
        remHi, remLo = split(allow)
        usedHi, usedLo, charges, first, chgHi, chgLo, counts = 0, 0, 0, nil, 0, 0, nil
      end
      -- Short: less remaining than the amount, or a used count that would pass
      -- 2^63 - 1 (which HINCRBY would refuse).
      amtHi, amtLo = split(ARGV[o + 13])
      nuHi, nuLo = usedHi + amtHi, usedLo + amtLo
      if nuLo >= G then nuHi, nuLo = nuHi + 1, nuLo - G end
      if replay or remHi < amtHi or (remHi == amtHi and remLo < amtLo) or
          nuHi > 9223372036 or (nuHi == 9223372036 and nuLo > 854775807) then
        if not replay then r[2] = 4 end
        r[10], r[11], r[12], r[13], r[14], r[15], r[16] = remHi, remLo, usedHi, usedLo, b[3] or '0', b[4], b[5] or '0'
        break
      end
      -- Indexed by the deadline dl, or by the caller's claim, which holds while the
      -- epoch it names is the account's.
      dl = nowus + ARGV[o + 18]
      if not ((nx and nx <= dl) or (ix and ix <= dl)) then
        local ce, cs = string.match(ARGV[o + 19], '^(%d+) (%d+)$')
        if ce ~= ie or cs + 0 > dl then r[2], r[10], r[11] = 5, dl, ie; break end
        if not ix or cs + 0 < ix then ix, ixSet = cs + 0, true end
      end
    end
    if replay then break end

    -- Every part allows the call: record them all.
    if hasRate then
      -- The new timestamp, now + nxt, written at the end.
      local total = ns + nxt
      local carry = idiv(total, 1000000000)
      tatS, tatNs, tatPX = s + carry, total - carry * 1000000000, idiv(nxt, 1000000) + 1001
    end
    if hasSlot then
      -- The lease. The set lives at least ARGV[o + 12] ms, its longest lease and a
      -- margin: if it held live leases before (nl > 1), each of them set its lifetime,
      -- which is then only extended (GT); if not, its lifetime is simply set. Set at
      -- the end, once: a plain lifetime and then GT ones make the longest of them,
      -- plain.
      if redis.call('ZADD', KEYS[4], string.format('%d', nowus + ARGV[o + 11]), ARGV[o + 4]) == 1 then
        zN = zN + 1
      else
        zUs = nil -- a lease renewed, perhaps one that had ended: count again
      end
      local ttl = ARGV[o + 12]
      if nl > 1 then
        if not pexp then
          pexp, pexpN, pexpGT = ttl, nil, true
        elseif ttl ~= pexp then
          pexpN = pexpN or pexp + 0
          local t = ttl + 0
          if t > pexpN then pexp, pexpN = ttl, t end
        end
      else
        pexp, pexpN, pexpGT = ttl, nil, false
      end
    end
    if hasCredits then
      remHi, remLo = remHi - amtHi, remLo - amtLo
      if remLo < 0 then remHi, remLo = remHi - 1, remLo + G end
      usedHi, usedLo = nuHi, nuLo
      chgHi, chgLo = chgHi + amtHi, chgLo + amtLo
      if chgLo >= G then chgHi, chgLo = chgHi + 1, chgLo - G end
      charges = charges + 1
      if charges == 1 then
        first = o -- written from its own arguments, if it stays the only one
      else
        if charges == 2 then
          counts = {}
          for j = first + 21, first + 20 + ARGV[first + 20] do counts[ARGV[j]] = (counts[ARGV[j]] or 0) + 1 end
        end
        for j = o + 21, o + 20 + napis do counts[ARGV[j]] = (counts[ARGV[j]] or 0) + 1 end
      end
      -- The marker of the open reservation: "o <amount> <period start>[ <APIs, joined
      -- by \31>]", and its deadline in the open set, written at the end.
      local m = 'o ' .. ARGV[o + 13] .. ' ' .. b[4]
      if napis == 1 then
        m = m .. ' ' .. ARGV[o + 21]
      elseif napis > 1 then
        m = m .. ' ' .. table.concat(ARGV, '\31', o + 21, o + 20 + napis)
      end
      redis.call('SET', marker, m, 'PX', ARGV[o + 17])
      opened[#opened + 1] = string.format('%d', dl)
      opened[#opened + 1] = ARGV[o + 4]
      if not nx or dl < nx then nx = dl end
      r[10], r[11], r[12], r[13], r[14], r[15], r[16] = remHi, remLo, usedHi, usedLo, b[3] or '0', b[4], b[5] or '0'
    else
      redis.call('SET', marker, 'a', 'PX', ARGV[o + 17])
    end
  until true
  if n == 1 then
    out = r
  else
    local b0 = (i - 1) * 16
    for k = 1, 16 do out[b0 + k] = r[k] end
  end
  o = o + 20 + napis
end

-- nx lowered to the earliest of the new reservations if it is earlier (or there was
-- none), and ix to a claim's score.
if nx and nx ~= nxStored then
  redis.call('HSET', KEYS[5], 'nx', string.format('%d', nx))
end
if ixSet then redis.call('HSET', KEYS[5], 'ix', string.format('%d', ix)) end

-- What the admitted steps changed together, dropped a second after the bucket is full
-- again for the timestamp, when it no longer matters.
if tatPX then
  redis.call('SET', KEYS[3], string.format('%d %d', tatS, tatNs), 'PX', string.format('%d', tatPX))
end
if pexp then
  if pexpGT then
    redis.call('PEXPIRE', KEYS[4], pexp, 'GT')
  else
    redis.call('PEXPIRE', KEYS[4], pexp)
  end
end
--#include flush_credits.lua
return out
