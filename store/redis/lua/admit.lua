-- Performs the admission steps of one account, in order: for each, replay check, key
-- check, rate, slot, credits, every check before any write, exactly as if each step ran
-- alone, one after the other (the replay check is made last, by the write of the
-- marker or, for a refused step, a lookup, and a replay is then decided again as one;
-- see below). It is the hot path, written out for speed (see the cost
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
-- ARGV: two per step, in order: 2i - 1 the member (request id), 2i the step's
-- parameters, one string of fields separated by byte 30, or, for any step but the
-- first, an empty string if they are those of the step before (as they nearly always
-- are: the script then does not read them again, and Redis does not receive them
-- again):
--   1 clock mode ('s': the server's clock; else the caller's now, in 2 and 3)
--   2 now s, 3 now ns
--   4 key mode (empty: no key check, 'k' key, 's' session), 5 for a key, its hash and
--     revisions: the hash in hexadecimal (64 digits), '/', the key's revision, '/', the
--     account's; for a session, the account's revision
--   6 emission interval ns of the step's events (empty: no rate; n events at once are
--     one event n intervals long), 7 window ns
--   8 ceiling (empty: no slot), 9 lease us, 10 lease set TTL ms
--   11 amount (empty: no credits), 12 period start us, 13 period end us, 14 allowance
--   15 the marker's TTL ms (an open reservation's with credits, else the retention)
--   16 the reservation's hold us
--   17 the claim ("<epoch> <score>": the caller indexed the account under that epoch
--      at that score; empty: none)
--   18 the length of the key id, then, after the last separator, the key id and the
--      APIs (joined by byte 31), with nothing between them
--
-- Reply: a step's 16 values, for a run of one step; for a run of several, a list of
-- their replies, one list of 16 values each (Redis converts a step's table as it is,
-- where copying it into one flat list cost a run more than the list of lists does).
-- A step's values: status, denial, key state, rate allowed, remaining, retry ns, reset
-- ns, slot acquired, in use, then the balance: the allowance part remaining and used as
-- pairs (hi, lo: hi * 10^9 + lo, see below), allowance, start, end, the lots' g, gl and
-- gn (see lib_grants.lua), and what the step took from the allowance and from the lots.
-- A step refused until the account is indexed (denial 5) has the deadline (us) to
-- index it by in place of the remaining credits' hi, and the epoch to index it under in
-- place of their lo.
--
-- A step that the allowance part does not cover but the grants do takes all of the
-- allowance and the rest from the lots, in spending order, off the hot path: it writes
-- what the steps before changed first, and its marker is "g <amount> <period start>
-- <plan>[ <APIs>]" (see reserve.lua). A lot that has lapsed at a step's now is dropped
-- first, before any void and any renewal, in the ledger's order (see prepare.lua).

--#include lib_idiv.lua
--#include lib_grants.lua
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
-- record of the key checked last (keyID, keyRec); whether the account exists (acct)
-- and its revision (arev);
-- the rate timestamp (tatS, tatNs; none if tatS is nil) and, once a step moved it,
-- its lifetime (tatPX); the live leases zN counted at zUs (nil: to count again); the
-- lease set's lifetime to set (pexp, with GT if pexpGT; pexpN, its value once
-- needed); the balance b (allowance and period as stored), its remaining and used
-- credits as pairs; the number of steps that charged it since it was read or renewed
-- (charges), the first one's amount and APIs (firstAmt, firstAPIs), and, from the
-- second one, the debit (chgHi, chgLo) and the charges by list of APIs (counts) to
-- write.
local srvS, srvNs, srvUs
local keyID, keyRec, acct, arev
local tatRead, tatS, tatNs, tatPX
local zN, zUs
local pexp, pexpN, pexpGT
local b, remHi, remLo, usedHi, usedLo
local charges, firstAmt, firstAPIs, chgHi, chgLo, counts = 0, nil, nil, 0, 0, nil
-- The open reservations to add (deadline, member pairs, written with the debit); nx as
-- stored (nxStored, a number, or false for none) and as the steps lower it (nx); the
-- index epoch (ie, a string) and the index bound (ix, a number, or false), and whether
-- a claim lowered ix (ixSet), to write at the end.
local opened, nxStored, nx, ie, ix, ixSet = {}, false, false, '0', false, false
-- The parameters in effect, read from the string P: the fields as strings (see ARGV),
-- the key id (kid) and the APIs (apis, joined by byte 31); what the steps need of
-- them as numbers (cS, cNs, cUs: the caller's now; e, window; ceiling, leaseUs;
-- amtHi, amtLo; hold); and what is worked out from them once: the key check's outcome
-- (keyOK: nil until checked, true, or the key state of a refusal), the end of a lease
-- taken at leaseAt (leaseEnd), the deadline of a reservation made at dlAt (dl, and
-- dlText in decimal), and the marker of an open reservation in the period mPs (m).
local P
local cmode, kmode, kwant, rE, sCeil, sTTL, cAmt, cPs, cPe, cAllow, mTTL, cClaim, kid, apis
local hasRate, hasSlot, hasCredits
local cS, cNs, cUs, e, window, ceiling, leaseUs, amtHi, amtLo, hold
local keyOK, leaseAt, leaseEnd, dlAt, dl, dlText, mPs, m

for i = 1, n do
  local member, marker = ARGV[2 * i - 1], KEYS[7 + i]
  local a = ARGV[2 * i]
  if a ~= '' and a ~= P then
    P = a
    local s, ns, rW, sLease, hld, klen, tail
    cmode, s, ns, kmode, kwant, rE, rW, sCeil, sLease, sTTL, cAmt, cPs, cPe, cAllow, mTTL, hld, cClaim, klen, tail = string.match(P,
      '^([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30([^\30]*)\30(%d+)\30(.*)$')
    if not tail then return redis.error_reply('ERR admit.lua: malformed parameters') end
    if klen == '0' then
      kid, apis = '', tail
    else
      kid, apis = string.sub(tail, 1, klen + 0), string.sub(tail, klen + 1)
    end
    hasRate, hasSlot, hasCredits = rE ~= '', sCeil ~= '', cAmt ~= ''
    if cmode ~= 's' then
      cS, cNs = s + 0, ns + 0
      cUs = cS * 1000000 + idiv(cNs, 1000)
    end
    if hasRate then e, window = rE + 0, rW + 0 end
    if hasSlot then ceiling, leaseUs = sCeil + 0, sLease + 0 end
    if hasCredits then
      amtHi, amtLo = split(cAmt)
      hold = hld + 0
    end
    keyOK, leaseAt, dlAt, m = nil, nil, nil, nil
  end
  -- A step replayed after it was admitted is admitted again and takes nothing: each
  -- part below then only reports what it reads. A step is decided first as a new one;
  -- if that admits it, its marker is written first, only if it does not exist (one
  -- command that is also the replay check); if it refuses it, the marker is looked
  -- up. Either way, a marker that exists makes it a replay, decided again as one
  -- (nothing was written for it, and what the first decision did, dropping ended
  -- leases, voiding and renewing, a replay does too).
  local r, replay, again
  while true do
    r = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '0', '0', '0', '0', '0', '0', 0, 0} -- the step's reply
    local claimed -- the score of a claim that lowers ix, once the step is admitted
    local viaGrants, fromA, amtN, plan -- a step that reaches the grants: what it takes from the allowance
    repeat -- a step ends early with break

      -- Now, for the limits: Unix seconds s, nanoseconds ns and microseconds nowus, from
      -- the server's clock (TIME answers seconds and microseconds) or the caller's.
      local s, ns, nowus
      if hasRate or hasSlot or hasCredits then
        if cmode == 's' then
          if not srvS then
            local t = redis.call('TIME')
            local us = t[2] + 0
            srvS = t[1] + 0
            srvNs, srvUs = us * 1000, srvS * 1000000 + us
          end
          s, ns, nowus = srvS, srvNs, srvUs
        else
          s, ns, nowus = cS, cNs, cUs
        end
      end

      -- Key: the record has this hash and is not revoked, and the account has the
      -- revision asked for; for a session, the account exists, at that revision. The
      -- records do not change during the run, so a check is made once for each set of
      -- parameters.
      if not replay then
        if kmode == 'k' then
          if keyOK == nil then
            if kid ~= keyID then
              keyID, keyRec = kid, redis.call('HMGET', KEYS[2], kid .. ':h', kid .. ':rev', kid .. ':v', 'arev')
            end
            local k = keyRec
            local kv, av = string.match(kwant, '^%x+/(%d+)/(%d+)$')
            if k[1] ~= string.sub(kwant, 1, 64) or (k[4] or '0') ~= av then keyOK = 1
            elseif k[2] then keyOK = 2
            elseif (k[3] or '0') ~= kv then keyOK = 1
            else keyOK = true end
          end
          if keyOK ~= true then r[2], r[3] = 1, keyOK; break end
        elseif kmode == 's' then
          if acct == nil then
            acct = redis.call('EXISTS', KEYS[1]) == 1
            arev = redis.call('HGET', KEYS[2], 'arev') or '0'
          end
          if not acct or arev ~= kwant then r[2], r[3] = 1, 1; break end
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
          if nl >= ceiling then
            redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', string.format('%d', nowus))
            nl = redis.call('ZCARD', KEYS[4])
            zN = nl
            if not redis.call('ZSCORE', KEYS[4], member) then
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
      local nuHi, nuLo
      if hasCredits then
        if not b then
          b = redis.call('HMGET', KEYS[5], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'ie', 'ix', 'g', 'gl', 'gn')
          nxStored = b[6] and b[6] + 0
          nx, ie, ix = nxStored, b[7] or '0', b[8] and b[8] + 0
          if b[4] then
            remHi, remLo = split(b[1] or '0')
            usedHi, usedLo = split(b[2] or '0')
          end
        end
        -- In the ledger's order (billing/driver.Ledger): the lapsed lots, the voids due by
        -- a renewal's start and the renewal, the voids due now.
        if b[10] and b[10] + 0 <= nowus and b[4] then
          -- A lot has lapsed: write what the steps before changed and drop it.
          --#include flush_credits.lua
          lapse_due(KEYS[5], nowus)
          local g = redis.call('HMGET', KEYS[5], 'g', 'gl', 'gn')
          b[9], b[10], b[11] = g[1], g[2], g[3]
        end
        if not b[4] then r[1] = 1; break end
        if cPs ~= b[4] and cPs + 0 > b[4] + 0 then
          local upto = cPs + 0
          if nowus < upto then upto = nowus end
          if nx and nx <= upto then
            -- Reservations past their deadline by the period's start: voided first, in
            -- the old period, as a step alone would.
            --#include flush_credits.lua
            local openK, balK, useK, base, vlimit, vttl, vupto = KEYS[7], KEYS[5], KEYS[6], string.sub(marker, 1, #marker - #member), 64, mTTL, upto
            --#include void_block.lua
            b = redis.call('HMGET', KEYS[5], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'ie', 'ix', 'g', 'gl', 'gn')
            nxStored = b[6] and b[6] + 0
            nx = nxStored
          end
          local rn = renewed(KEYS[5], cAllow)
          redis.call('HSET', KEYS[5], 'rem', rn, 'used', '0', 'allow', cAllow, 'ps', cPs, 'pe', cPe)
          redis.call('DEL', KEYS[6])
          -- The renewal overwrites the debit and the usage counts of the steps before.
          b = {rn, '0', cAllow, cPs, cPe, nil, nil, nil, b[9], b[10], b[11]}
          remHi, remLo = split(rn)
          usedHi, usedLo, charges, firstAmt, firstAPIs, chgHi, chgLo, counts = 0, 0, 0, nil, nil, 0, 0, nil
        end
        if nx and nx <= nowus then
          -- A reservation is past its deadline: write what the steps before changed,
          -- void the due ones, and read the balance again, as a step alone would.
          --#include flush_credits.lua
          local openK, balK, useK, base, vlimit, vttl, vupto = KEYS[7], KEYS[5], KEYS[6], string.sub(marker, 1, #marker - #member), 64, mTTL, nowus
          --#include void_block.lua
          b = redis.call('HMGET', KEYS[5], 'rem', 'used', 'allow', 'ps', 'pe', 'nx', 'ie', 'ix', 'g', 'gl', 'gn')
          nxStored = b[6] and b[6] + 0
          nx = nxStored
          remHi, remLo = split(b[1] or '0')
          usedHi, usedLo = split(b[2] or '0')
        end
        -- Short: less remaining than the amount, or a used count that would pass
        -- 2^63 - 1 (which HINCRBY would refuse).
        nuHi, nuLo = usedHi + amtHi, usedLo + amtLo
        if nuLo >= G then nuHi, nuLo = nuHi + 1, nuLo - G end
        local short = remHi < amtHi or (remHi == amtHi and remLo < amtLo)
        local over = nuHi > 9223372036 or (nuHi == 9223372036 and nuLo > 854775807)
        if short and not over and not replay and b[9] then
          -- Short of the allowance: the grants may cover the rest.
          fromA, amtN = remHi * G + remLo, amtHi * G + amtLo
          viaGrants = fromA + b[9] >= amtN
        end
        r[17], r[18], r[19] = b[9] or '0', b[10] or '0', b[11] or '0'
        if replay or ((short or over) and not viaGrants) then
          if not replay then r[2] = 4 end
          r[10], r[11], r[12], r[13], r[14], r[15], r[16] = remHi, remLo, usedHi, usedLo, b[3] or '0', b[4], b[5] or '0'
          break
        end
        -- Indexed by the deadline dl, or by the caller's claim, which holds while the
        -- epoch it names is the account's.
        if dlAt ~= nowus then dlAt, dl, dlText = nowus, nowus + hold, nil end
        if not ((nx and nx <= dl) or (ix and ix <= dl)) then
          local ce, cs = string.match(cClaim, '^(%d+) (%d+)$')
          if ce ~= ie or cs + 0 > dl then r[2], r[10], r[11] = 5, dl, ie; break end
          if not ix or cs + 0 < ix then claimed = cs + 0 end
        end
      end
      if replay then break end

      -- Every part allows the call: the marker, unless it exists (a replay), then the
      -- rest. An open reservation's is "o <amount> <period start>[ <APIs, joined by
      -- byte 31>]"; an admission's without credits, "a".
      local mv = 'a'
      if viaGrants then
        plan = plan_take(KEYS[5], amtN - fromA)
        mv = 'g ' .. cAmt .. ' ' .. b[4] .. ' ' .. plan
        if apis ~= '' then mv = mv .. ' ' .. apis end
      elseif hasCredits then
        if mPs ~= b[4] or not m then
          mPs = b[4]
          if apis == '' then m = 'o ' .. cAmt .. ' ' .. mPs else m = 'o ' .. cAmt .. ' ' .. mPs .. ' ' .. apis end
        end
        mv = m
      end
      if redis.call('SET', marker, mv, 'NX', 'PX', mTTL, 'GET') then again = true; break end
      if claimed then ix, ixSet = claimed, true end
      if hasRate then
        -- The new timestamp, now + nxt, written at the end.
        local total = ns + nxt
        local carry = idiv(total, 1000000000)
        tatS, tatNs, tatPX = s + carry, total - carry * 1000000000, idiv(nxt, 1000000) + 1001
      end
      if hasSlot then
        -- The lease. The set lives at least sTTL ms, its longest lease and a margin: if
        -- it held live leases before (nl > 1), each of them set its lifetime, which is
        -- then only extended (GT); if not, its lifetime is simply set. Set at the end,
        -- once: a plain lifetime and then GT ones make the longest of them, plain.
        if leaseAt ~= nowus then leaseAt, leaseEnd = nowus, string.format('%d', nowus + leaseUs) end
        if redis.call('ZADD', KEYS[4], leaseEnd, member) == 1 then
          zN = zN + 1
        else
          zUs = nil -- a lease renewed, perhaps one that had ended: count again
        end
        if nl > 1 then
          if not pexp then
            pexp, pexpN, pexpGT = sTTL, nil, true
          elseif sTTL ~= pexp then
            pexpN = pexpN or pexp + 0
            local t = sTTL + 0
            if t > pexpN then pexp, pexpN = sTTL, t end
          end
        else
          pexp, pexpN, pexpGT = sTTL, nil, false
        end
      end
      if viaGrants then
        -- All of the allowance and the rest from the lots, written now, after what the
        -- steps before changed.
        --#include flush_credits.lua
        take_lots(KEYS[5], plan)
        redis.call('HSET', KEYS[5], 'rem', '0')
        redis.call('HINCRBY', KEYS[5], 'used', cAmt)
        for api in string.gmatch(apis, '[^\31]+') do redis.call('HINCRBY', KEYS[6], api, '1') end
        remHi, remLo = 0, 0
        usedHi, usedLo = nuHi, nuLo
        local g = redis.call('HMGET', KEYS[5], 'g', 'gl', 'gn')
        b[9], b[10], b[11] = g[1], g[2], g[3]
        r[17], r[18], r[19], r[20], r[21] = b[9] or '0', b[10] or '0', b[11] or '0', fromA, amtN - fromA
      elseif hasCredits then
        r[20] = amtHi * G + amtLo
        remHi, remLo = remHi - amtHi, remLo - amtLo
        if remLo < 0 then remHi, remLo = remHi - 1, remLo + G end
        usedHi, usedLo = nuHi, nuLo
        chgHi, chgLo = chgHi + amtHi, chgLo + amtLo
        if chgLo >= G then chgHi, chgLo = chgHi + 1, chgLo - G end
        charges = charges + 1
        if charges == 1 then
          firstAmt, firstAPIs = cAmt, apis -- written as they are, if it stays the only one
        else
          if charges == 2 then
            counts = {}
            if firstAPIs ~= '' then counts[firstAPIs] = 1 end
          end
          if apis ~= '' then counts[apis] = (counts[apis] or 0) + 1 end
        end
      end
      if hasCredits then
        -- The reservation's deadline in the open set, written at the end.
        if not dlText then dlText = string.format('%d', dl) end
        opened[#opened + 1] = dlText
        opened[#opened + 1] = member
        if not nx or dl < nx then nx = dl end
        r[10], r[11], r[12], r[13], r[14], r[15], r[16] = remHi, remLo, usedHi, usedLo, b[3] or '0', b[4], b[5] or '0'
      end
    until true
    if not again and not replay and (r[1] ~= 0 or r[2] ~= 0) then
      again = redis.call('EXISTS', marker) == 1
    end
    if not again then break end
    replay, again = true, false
  end
  if n == 1 then out = r else out[i] = r end
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
