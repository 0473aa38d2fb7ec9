package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Every script declares in KEYS every key it touches, and the keys of
// one script share one hash tag (the account's), so that each script runs on one Redis
// Cluster slot. The global index keys (key id and key hash to account) are only ever
// used by single-key commands.
//
// Numbers: Lua in Redis has only doubles, exact for integers below 2^53. Times therefore
// travel as a pair (Unix seconds, nanoseconds) and the rate-limit arithmetic works on
// the difference between the stored timestamp and now, which is small; lease scores
// and credit periods are Unix microseconds (about 1.9e15 in 2030, below 2^53). Balances
// are changed with HINCRBY (exact 64-bit integers in Redis) from decimal strings made
// by Go, and read back as strings, never through a Lua number.
//
// Cost: Redis runs a script's whole text on every call, so every function it defines is
// created anew each time, and Lua's conversions between numbers and strings are slow.
// In instructions of Redis 7.0 (callgrind): a simple command called from a script
// costs about 2,900 to run and as much again to pass its arguments and reply between
// Lua and Redis; each key or argument of the script, about 650 to pass; a helper
// function defined and called, about 1,200; tonumber, 1,400 to 2,000 (it parses its
// argument twice); s + 0, 600 to 900; string.format with '%d', 2,000, and with
// '%.0f', 5,000; a number rather than a string passed to redis.call, 3,800 more
// (Redis formats it with '%.17g'); a table in a script's reply, about 3,000 beyond its
// values. The two scripts of the hot path (admitScript, closeScript) therefore take
// the steps of many calls in one run and read the account's state once for all of
// them (see admitScript), reply one flat list, define few helpers, read numbers by
// arithmetic (s + 0) and format the numbers they send with '%d', which is exact for
// integers below 2^53, negative ones too, on the 64-bit builds Redis runs on. A paid
// call (an admission and its closing, every part in Redis) costs about 130,000
// instructions in runs of 10 steps and 123,000 in runs of 30, against 246,000 for the
// scripts of one step each that these replaced; a run of one step costs 269,000, the
// price of carrying state that it does not share. The other scripts prepend only the
// helper groups they call (libTime, libRate, libSlot, libBalance).

// libIdiv is the integer division every script of the limits needs, admitScript's
// only helper. Redis keeps the scripts' globals read-only, so every helper is local.
const libIdiv = `
-- idiv returns floor(a / b) for integers a >= 0, b > 0 below 2^53, exactly: the
-- floating-point quotient may be off by one near an integer, and the remainder says so.
local function idiv(a, b)
  local q = math.floor(a / b)
  local rest = a - q * b
  if rest < 0 then q = q - 1 elseif rest >= b then q = q + 1 end
  return q
end
`

// libTime holds the arithmetic and the clock.
const libTime = libIdiv + `
-- fmt formats an integer-valued number below 2^53 without an exponent.
local function fmt(x)
  return string.format('%d', x)
end

-- clock returns now as Unix seconds and nanoseconds: the Redis server's clock (mode
-- 's'), or the caller's, passed in s and ns.
local function clock(mode, s, ns)
  if mode == 's' then
    local t = redis.call('TIME')
    return tonumber(t[1]), tonumber(t[2]) * 1000
  end
  return tonumber(s), tonumber(ns)
end

local function micros(s, ns)
  return s * 1000000 + idiv(ns, 1000)
end
`

// libRate holds the rate limit's GCRA; it needs libTime. admitScript has its own copy
// of this arithmetic, written out.
const libRate = `
-- tat_offset returns the stored theoretical arrival time minus now, in nanoseconds,
-- or 0 if it is in the past or there is none (billing.GCRA's max(tat, now) - now).
local function tat_offset(key, s, ns)
  local v = redis.call('GET', key)
  if not v then return 0 end
  local ts, tns = string.match(v, '^(%-?%d+) (%d+)$')
  if not ts then return 0 end
  local t = (tonumber(ts) - s) * 1000000000 + (tonumber(tns) - ns)
  if t < 0 then return 0 end
  return t
end

-- gcra decides one event as billing.GCRA does, relative to now: e is the emission
-- interval and window Burst*e, in nanoseconds. It returns allowed (1 or 0),
-- remaining, retry-after, reset-after, and for an allowed event the timestamp to store
-- and its distance from now.
local function gcra(key, s, ns, e, window)
  local t = tat_offset(key, s, ns)
  local nxt = t + e
  if nxt > window then
    return 0, 0, nxt - window, t, nil, 0
  end
  local total = ns + nxt
  local carry = idiv(total, 1000000000)
  return 1, idiv(window - nxt, e), 0, nxt, fmt(s + carry) .. ' ' .. fmt(total - carry * 1000000000), nxt
end

-- gcra_store records an allowed event; the timestamp is dropped a second after the
-- bucket is full again, when it no longer matters.
local function gcra_store(key, tat, nxt)
  redis.call('SET', key, tat, 'PX', fmt(idiv(nxt, 1000000) + 1001))
end
`

// libSlot holds the concurrency leases; it needs libTime. admitScript has its own copy,
// written out.
const libSlot = `
-- slot_check drops ended leases (end <= now) and reports whether member may hold a
-- slot, and the number of slots held if it does (or held, if it may not).
local function slot_check(key, member, ceiling, nowus)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(nowus))
  local n = redis.call('ZCARD', key)
  if redis.call('ZSCORE', key, member) then return true, n end
  if n >= ceiling then return false, n end
  return true, n + 1
end

-- slot_hold grants or renews member's lease until endus; the set lives at least ttl
-- milliseconds, the longest lease in it plus a margin. others tells whether the set
-- held live leases before: if it did, every one of them set the set's lifetime (so it
-- has one) and it is only ever extended (GT); if not, its lifetime is simply set.
local function slot_hold(key, member, endus, ttl, others)
  redis.call('ZADD', key, fmt(endus), member)
  if others then
    redis.call('PEXPIRE', key, ttl, 'GT')
  else
    redis.call('PEXPIRE', key, ttl)
  end
end
`

// libBalance holds the balance's renewal and reading. admitScript and closeScript have
// their own copy of the renewal, written out.
const libBalance = `
-- renew applies a due renewal of the balance (period start ps later than the stored
-- one) and reports whether the account has a balance at all.
local function renew(bal, use, ps, pe, allowance)
  local cur = redis.call('HGET', bal, 'ps')
  if not cur then return false end
  if tonumber(ps) > tonumber(cur) then
    redis.call('HSET', bal, 'rem', allowance, 'used', '0', 'allow', allowance, 'ps', ps, 'pe', pe)
    redis.call('DEL', use)
  end
  return true
end

-- with_balance returns status followed by the stored balance as strings: remaining,
-- used, allowance, period start and end (Unix microseconds).
local function with_balance(status, bal)
  local b = redis.call('HMGET', bal, 'rem', 'used', 'allow', 'ps', 'pe')
  for i = 1, 5 do
    if not b[i] then b[i] = '0' end
  end
  return {status, b[1], b[2], b[3], b[4], b[5]}
end
`

// voidBlock voids the account's reservations open past their deadline at nowus (a
// number, in the store's clock), at most vlimit of them, and then keeps in the balance's
// field nx the earliest deadline still open (none if none). It is a block of code, not a
// function, so that the hot path's scripts, which include it, pay nothing for it until
// it runs: it runs only when nx says that a deadline has passed. It expects the locals
// openK (the account's open reservations, a sorted set of request ids by deadline),
// balK, useK, base (the markers' names less the request id), nowus, vlimit and vttl
// (the voided markers' TTL in ms), and sets vcount, the number voided. A voided
// reservation's marker becomes "v"; its credits come back and its APIs are uncounted
// if it was made in the balance's current period.
const voidBlock = `
local vcount = 0
do
  local ids = redis.call('ZRANGEBYSCORE', openK, '-inf', string.format('%d', nowus), 'LIMIT', 0, vlimit)
  if #ids > 0 then
    local ps = redis.call('HGET', balK, 'ps')
    for _, id in ipairs(ids) do
      local mk = base .. id
      local m = redis.call('GET', mk)
      local amt, rps, apis
      if m then amt, rps, apis = string.match(m, '^o (%d+) (%-?%d+) ?(.*)$') end
      if amt then
        redis.call('SET', mk, 'v', 'PX', vttl)
        if rps == ps then
          if amt ~= '0' then
            redis.call('HINCRBY', balK, 'rem', amt)
            redis.call('HINCRBY', balK, 'used', '-' .. amt)
          end
          for api in string.gmatch(apis, '[^\31]+') do
            local c = redis.call('HGET', useK, api)
            if c and c + 0 > 0 then redis.call('HINCRBY', useK, api, '-1') end
          end
        end
        vcount = vcount + 1
      end
    end
    redis.call('ZREM', openK, unpack(ids))
  end
  local first = redis.call('ZRANGE', openK, 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('HSET', balK, 'nx', first[2])
  else
    redis.call('HDEL', balK, 'nx')
  end
end
`

// flushCredits is the end of admitScript's runs, and what a step that voids writes
// first: the debit and the usage counts of the steps since the balance was read (one
// step's from its own arguments), and the open reservations they made. It is a block
// of code included in the script where it runs (see voidBlock).
const flushCredits = `
if charges == 1 then
  local amt = ARGV[first + 13]
  if amt ~= '0' then
    redis.call('HINCRBY', KEYS[5], 'rem', '-' .. amt)
    redis.call('HINCRBY', KEYS[5], 'used', amt)
  end
  for j = first + 21, first + 20 + ARGV[first + 20] do redis.call('HINCRBY', KEYS[6], ARGV[j], '1') end
elseif charges > 1 then
  if chgHi ~= 0 or chgLo ~= 0 then
    local c = text(chgHi, chgLo)
    redis.call('HINCRBY', KEYS[5], 'rem', '-' .. c)
    redis.call('HINCRBY', KEYS[5], 'used', c)
  end
  for api, c in pairs(counts) do redis.call('HINCRBY', KEYS[6], api, string.format('%d', c)) end
end
charges, first, chgHi, chgLo, counts = 0, nil, 0, 0, nil
if #opened > 0 then
  redis.call('ZADD', KEYS[7], unpack(opened))
  opened = {}
end
`

// The status codes scripts answer with.
const (
	stOK           = 0
	stNotFound     = 1 // no balance, no account, no key
	stConflict     = 2 // taken, revoked, refund too large
	stInsufficient = 3 // balance short
	stUnknown      = 4 // unknown reservation
	stOverflow     = 5 // a refund would take the remaining credits past 2^63-1
	stVoided       = 6 // the reservation was voided at its expiry
	stTooMany      = 7 // the remaining plus used credits would pass billing.MaxCredits
	stIndex        = 8 // refused until the account is indexed (see Store.indexFirst)
)

// admitScript performs the admission steps of one account, in order: for each, replay
// check, key check, rate, slot, credits, every check before any write, exactly as if
// each step ran alone, one after the other. It is the hot path, written out for speed
// (see Cost above): what the steps read (the server's clock, the key records, the rate
// timestamp, the live leases, the balance) is read once and then carried in the
// script as each step changes it, and what the admitted steps change together (the
// timestamp, the lease set's lifetime, the debit, the usage counts) is written once,
// at the end; only the markers and the leases are written step by step. No step reads
// what is written at the end, and a script is atomic, so the result is the same.
//
// A reservation is open until its deadline, the step's now plus its hold: the marker
// holds its amount, period and APIs, and the account's open set its deadline. The
// first step with credits voids the account's reservations past their deadline first
// (voidBlock), when the balance's nx says one is due; the run then adds its
// reservations to the open set in one ZADD, and lowers nx if one of them is due
// earlier. A reservation opens only if the index of expiring accounts already finds the
// account by its deadline (nx or ix is no later), or the step claims it has just been
// indexed under the account's epoch (see the package documentation); if not, the step
// is refused with denial 5, changing nothing, and the caller indexes the account and
// sends the step again with its claim.
//
// KEYS: 1 account record, 2 key records, 3 rate timestamp, 4 leases, 5 balance,
// 6 usage, 7 open reservations, then the marker of each step (7 + i for step i).
// ARGV: one block per step, in order: 1 clock mode, 2 now s, 3 now ns, 4 member
// (request id), 5 key mode (empty: none, 'k' key, 's' session), 6 key id, 7 key hash,
// 8 emission interval ns (empty: no rate), 9 window ns, 10 ceiling (empty: no slot),
// 11 lease us, 12 lease set TTL ms, 13 amount (empty: no credits), 14 period start us,
// 15 period end us, 16 allowance, 17 the marker's TTL ms (an open reservation's with
// credits, else the retention), 18 the reservation's hold us, 19 the claim ("<epoch>
// <score>": the caller indexed the account under that epoch at that score; empty:
// none), 20 the number k of APIs, 21..20+k the APIs.
//
// Reply: for each step in turn, 16 values: status, denial, key state, rate allowed,
// remaining, retry ns, reset ns, slot acquired, in use, then the balance: remaining and
// used as pairs (hi, lo: hi * 10^9 + lo, see below), allowance, start, end. A step
// refused until the account is indexed (denial 5) has the deadline (us) to index it by
// in place of the remaining credits' hi, and the epoch to index it under in place of
// their lo.
var admitScript = goredis.NewScript(libIdiv + `
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
          keyID, keyRec = id, redis.call('HMGET', KEYS[2], id .. ':h', id .. ':rev')
        end
        local k = keyRec
        if k[1] ~= ARGV[o + 7] then r[2], r[3] = 1, 1; break end
        if k[2] then r[2], r[3] = 1, 2; break end
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
        ` + flushCredits + `
        local openK, balK, useK, base, vlimit, vttl = KEYS[7], KEYS[5], KEYS[6], string.sub(marker, 1, #marker - #ARGV[o + 4]), 64, ARGV[o + 17]
        ` + voidBlock + `
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
` + flushCredits + `
return out
`)

// closeScript frees the slots and settles the reservations of one account's calls,
// each at most once, in order, as if each closing ran alone; Settle runs it too,
// freeing nothing. It is the hot path, written out for speed (see Cost above): the
// leases and the open reservations are removed with one ZREM each, and the balance is
// read once. A step given the caller's now (with Options.CallerClock) first voids the
// account's reservations past their deadline (voidBlock), when nx says one is due; on
// the server's clock, closings leave that to admissions, balance reads and sweeps, so
// that a closing reads no clock. A reservation that was voided stays voided: the
// closing answers status 6 and changes nothing.
//
// KEYS: 1 leases, 2 balance, 3 usage, 4 open reservations, then the marker of each
// step (4 + i for step i).
// ARGV: one block per step, in order: 1 member, 2 release ('1' or empty), 3 refund,
// 4 -refund, 5 period start us, 6 period end us, 7 allowance, 8 retention ms, 9 open
// reservation TTL ms, 10 now us (empty: the server's clock), 11 the number k of APIs
// to uncount, 12..11+k the APIs.
//
// Reply: for each step in turn, 6 values: status, then the balance (remaining, used,
// allowance, start, end). Status 0 ok, 1 no balance, 2 refund too large, 4 unknown
// reservation, 5 refund beyond what the balance can hold, 6 voided; with 1 and 4, the
// balance is zeros.
var closeScript = goredis.NewScript(`
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
      ` + voidBlock + `
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
`)

// rateScript decides (and with ARGV[6] = '1' records) one event.
//
// KEYS: 1 rate timestamp. ARGV: 1 clock mode, 2 now s, 3 now ns, 4 emission interval
// ns, 5 window ns, 6 record. Reply: allowed, remaining, retry ns, reset ns.
var rateScript = goredis.NewScript(libTime + libRate + `
local s, ns = clock(ARGV[1], ARGV[2], ARGV[3])
local ok, rem, retry, reset, tat, nxt = gcra(KEYS[1], s, ns, tonumber(ARGV[4]), tonumber(ARGV[5]))
if ok == 1 and ARGV[6] == '1' then gcra_store(KEYS[1], tat, nxt) end
return {ok, rem, retry, reset}
`)

// acquireScript grants or renews a slot.
//
// KEYS: 1 leases. ARGV: 1 clock mode, 2 now s, 3 now ns, 4 member, 5 ceiling,
// 6 lease us, 7 set TTL ms. Reply: acquired, in use.
var acquireScript = goredis.NewScript(libTime + libSlot + `
local s, ns = clock(ARGV[1], ARGV[2], ARGV[3])
local nowus = micros(s, ns)
local ok, n = slot_check(KEYS[1], ARGV[4], tonumber(ARGV[5]), nowus)
if not ok then return {0, n} end
slot_hold(KEYS[1], ARGV[4], nowus + tonumber(ARGV[6]), ARGV[7], n > 1)
return {1, n}
`)

// renewScript extends a live lease. KEYS and ARGV as acquireScript without the
// ceiling: 4 member, 5 lease us, 6 set TTL ms. Reply: status.
var renewScript = goredis.NewScript(libTime + libSlot + `
local s, ns = clock(ARGV[1], ARGV[2], ARGV[3])
local nowus = micros(s, ns)
local sc = redis.call('ZSCORE', KEYS[1], ARGV[4])
if not sc or tonumber(sc) <= nowus then
  if sc then redis.call('ZREM', KEYS[1], ARGV[4]) end
  return 1
end
slot_hold(KEYS[1], ARGV[4], nowus + tonumber(ARGV[5]), ARGV[6], true)
return 0
`)

// inUseScript counts live leases. KEYS: 1 leases. ARGV: 1 clock mode, 2 now s, 3 now ns.
var inUseScript = goredis.NewScript(libTime + `
local s, ns = clock(ARGV[1], ARGV[2], ARGV[3])
return redis.call('ZCOUNT', KEYS[1], '(' .. fmt(micros(s, ns)), '+inf')
`)

// openScript creates a balance. KEYS: 1 balance. ARGV: remaining, allowance, period
// start us, period end us.
var openScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 2 end
redis.call('HSET', KEYS[1], 'rem', ARGV[1], 'used', '0', 'allow', ARGV[2], 'ps', ARGV[3], 'pe', ARGV[4])
return 0
`)

// voidDue is the prologue of the plain scripts that operate on a balance: it voids the
// account's reservations past their deadline at now (voidBlock) when nx says one is
// due. It expects the locals balK, useK, openK, base, vttl, nowus, and vlimit.
const voidDue = `
local due = redis.call('HGET', balK, 'nx')
if due and due + 0 <= nowus then
` + voidBlock + `
end
`

// reserveScript takes credits, as an admission's credits part does (see admitScript),
// refusing with status 8, the deadline and the epoch, to open a reservation the index
// of expiring accounts would not find. KEYS: 1 balance, 2 usage, 3 marker, 4 open
// reservations. ARGV: 1 amount, 2 -amount, 3 period start us, 4 period end us,
// 5 allowance, 6 open reservation TTL ms, 7 clock mode, 8 now s, 9 now ns, 10 hold us,
// 11 member, 12 the markers' base, 13 the claim (as admitScript's), 14.. APIs. Reply:
// status and the balance, or 8, the deadline and the epoch.
var reserveScript = goredis.NewScript(libTime + libBalance + `
if not renew(KEYS[1], KEYS[2], ARGV[3], ARGV[4], ARGV[5]) then return {1} end
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[4], ARGV[12], ARGV[6], 64
local nowus = micros(clock(ARGV[7], ARGV[8], ARGV[9]))
` + voidDue + `
if redis.call('EXISTS', KEYS[3]) == 1 then return with_balance(0, KEYS[1]) end
if tonumber(redis.call('HGET', KEYS[1], 'rem')) < tonumber(ARGV[1]) then return with_balance(3, KEYS[1]) end
local d = nowus + ARGV[10]
local x = redis.call('HMGET', KEYS[1], 'nx', 'ie', 'ix')
local nx, ie, ix = x[1] and x[1] + 0, x[2] or '0', x[3] and x[3] + 0
if not ((nx and nx <= d) or (ix and ix <= d)) then
  local ce, cs = string.match(ARGV[13], '^(%d+) (%d+)$')
  if ce ~= ie or cs + 0 > d then return {8, fmt(d), ie} end
  if not ix or cs + 0 < ix then redis.call('HSET', KEYS[1], 'ix', cs) end
end
redis.call('HINCRBY', KEYS[1], 'rem', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'used', ARGV[1])
local apis = {}
for i = 14, #ARGV do
  redis.call('HINCRBY', KEYS[2], ARGV[i], '1')
  apis[#apis + 1] = ARGV[i]
end
local m = 'o ' .. ARGV[1] .. ' ' .. redis.call('HGET', KEYS[1], 'ps')
if #apis > 0 then m = m .. ' ' .. table.concat(apis, '\31') end
redis.call('SET', KEYS[3], m, 'PX', ARGV[6])
redis.call('ZADD', KEYS[4], fmt(d), ARGV[11])
if not nx or d < nx then redis.call('HSET', KEYS[1], 'nx', fmt(d)) end
return with_balance(0, KEYS[1])
`)

// adjustScript adds to the balance. KEYS: 1 balance, 2 usage, 3 marker, 4 open
// reservations. ARGV: 1 amount, 2 period start us, 3 period end us, 4 allowance,
// 5 retention ms, 6 clock mode, 7 now s, 8 now ns, 9 the markers' base, 10 the voided
// markers' TTL ms, 11 the most remaining plus used credits may come to.
var adjustScript = goredis.NewScript(libTime + libBalance + `
if not renew(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4]) then return {1} end
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[4], ARGV[9], ARGV[10], 64
local nowus = micros(clock(ARGV[6], ARGV[7], ARGV[8]))
` + voidDue + `
if redis.call('EXISTS', KEYS[3]) == 1 then return with_balance(0, KEYS[1]) end
local amt = tonumber(ARGV[1])
local b = redis.call('HMGET', KEYS[1], 'rem', 'used')
local rem, used = tonumber(b[1]), tonumber(b[2] or '0')
if amt > 0 and amt > tonumber(ARGV[11]) - rem - used then return with_balance(7, KEYS[1]) end
if rem + amt < 0 then return with_balance(3, KEYS[1]) end
redis.call('HINCRBY', KEYS[1], 'rem', ARGV[1])
redis.call('SET', KEYS[3], 'd', 'PX', ARGV[5])
return with_balance(0, KEYS[1])
`)

// balanceScript renews if due, voids the reservations past their deadline, and reads.
// KEYS: 1 balance, 2 usage, 3 open reservations. ARGV: 1 period start us, 2 period end
// us, 3 allowance, 4 clock mode, 5 now s, 6 now ns, 7 the markers' base, 8 the voided
// markers' TTL ms.
var balanceScript = goredis.NewScript(libTime + libBalance + `
if not renew(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]) then return {1} end
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[3], ARGV[7], ARGV[8], 64
local nowus = micros(clock(ARGV[4], ARGV[5], ARGV[6]))
` + voidDue + `
return with_balance(0, KEYS[1])
`)

// voidScript voids up to ARGV[4] of an account's reservations past their deadline, for
// a sweep that found the account in the index of expiring accounts under epoch ARGV[7]
// (empty: an entry of no epoch), and prepares the entry that replaces it (see the
// package documentation): if that epoch is the account's, the account moves to the
// next one; ix becomes the earliest deadline still open (nx), which the replacing entry
// is written at. KEYS: 1 open reservations, 2 balance, 3 usage. ARGV: 1 clock mode,
// 2 now s, 3 now ns, 4 limit, 5 the markers' base, 6 the voided markers' TTL ms, 7 the
// epoch found. Reply: the number voided, nx (or the empty string: no entry replaces the
// one found), and the account's epoch.
var voidScript = goredis.NewScript(libTime + `
if redis.call('EXISTS', KEYS[2]) == 0 then return {0, '', '0'} end
local openK, balK, useK, base, vlimit, vttl = KEYS[1], KEYS[2], KEYS[3], ARGV[5], tonumber(ARGV[4]), ARGV[6]
local nowus = micros(clock(ARGV[1], ARGV[2], ARGV[3]))
` + voidBlock + `
local x = redis.call('HMGET', KEYS[2], 'nx', 'ie')
local ie = x[2] or '0'
if ARGV[7] == ie then ie = fmt(redis.call('HINCRBY', KEYS[2], 'ie', 1)) end
if x[1] then
  redis.call('HSET', KEYS[2], 'ix', x[1])
else
  redis.call('HDEL', KEYS[2], 'ix')
end
return {vcount, x[1] or '', ie}
`)

// dueScript lists the entries of the index of expiring accounts whose score (an
// account's earliest deadline, or earlier) has passed. KEYS: 1 the index. ARGV: 1 clock
// mode, 2 now s, 3 now ns, 4 limit. Reply: the entries.
var dueScript = goredis.NewScript(libTime + `
local nowus = micros(clock(ARGV[1], ARGV[2], ARGV[3]))
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', nowus), 'LIMIT', 0, ARGV[4])
`)

// reindexScript replaces the entry a sweep found in the index of expiring accounts:
// it removes it and, when the account still has open reservations, writes the entry
// of the account's epoch at their earliest deadline, or leaves that entry lower if it is
// already. KEYS: 1 the index. ARGV: 1 the entry found, 2 the account's entry, 3 the
// deadline (empty: none).
var reindexScript = goredis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[1], 'LT', ARGV[3], ARGV[2]) end
return 0
`)

// usageScript reads the usage counts of period ARGV[1] (start us). KEYS: 1 balance,
// 2 usage. Reply: status, then API and count pairs.
var usageScript = goredis.NewScript(`
local ps = redis.call('HGET', KEYS[1], 'ps')
if not ps then return {1} end
if ps ~= ARGV[1] then return {0} end
local r = redis.call('HGETALL', KEYS[2])
table.insert(r, 1, 0)
return r
`)

// Key records of an account live in one hash, KEYS "keys", with the fields
// <id>:h (current hash, hex), <id>:rec (JSON of the fixed fields), <id>:rot and <id>:rev
// (RFC 3339 moments, absent while unset); the list "korder" keeps the ids in creation
// order. A field name splits at its last colon, so ids may contain colons.

// createAccountScript stores an account with its primary key. KEYS: 1 account,
// 2 keys, 3 korder. ARGV: account JSON, key id, hash, key JSON.
var createAccountScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 2 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2] .. ':h', ARGV[3], ARGV[2] .. ':rec', ARGV[4])
redis.call('RPUSH', KEYS[3], ARGV[2])
return 0
`)

// createKeyScript stores a further key. KEYS: 1 account, 2 keys, 3 korder. ARGV: key
// id, hash, key JSON.
var createKeyScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
if redis.call('HEXISTS', KEYS[2], ARGV[1] .. ':h') == 1 then return 2 end
redis.call('HSET', KEYS[2], ARGV[1] .. ':h', ARGV[2], ARGV[1] .. ':rec', ARGV[3])
redis.call('RPUSH', KEYS[3], ARGV[1])
return 0
`)

// listKeysScript reads every key of an account. KEYS: 1 account, 2 keys, 3 korder.
// Reply: status, then per key: id, hash, JSON, rotated, revoked.
var listKeysScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return {1} end
local out = {0}
for _, id in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  local f = redis.call('HMGET', KEYS[2], id .. ':h', id .. ':rec', id .. ':rot', id .. ':rev')
  out[#out + 1] = id
  for i = 1, 4 do out[#out + 1] = f[i] or '' end
end
return out
`)

// resolveScript reads a key and its account if the key's current hash is ARGV[2].
// KEYS: 1 account, 2 keys. ARGV: key id, hash. Reply: status, JSON, rotated, revoked,
// account JSON.
var resolveScript = goredis.NewScript(`
local f = redis.call('HMGET', KEYS[2], ARGV[1] .. ':h', ARGV[1] .. ':rec', ARGV[1] .. ':rot', ARGV[1] .. ':rev')
if f[1] ~= ARGV[2] then return {1} end
local a = redis.call('GET', KEYS[1])
if not a then return {1} end
return {0, f[2], f[3] or '', f[4] or '', a}
`)

// rotateScript replaces a live key's hash. KEYS: 1 keys. ARGV: key id, new hash,
// moment. Reply: status, old hash, JSON.
var rotateScript = goredis.NewScript(`
local f = redis.call('HMGET', KEYS[1], ARGV[1] .. ':h', ARGV[1] .. ':rec', ARGV[1] .. ':rev')
if not f[1] then return {1} end
if f[3] then return {2} end
redis.call('HSET', KEYS[1], ARGV[1] .. ':h', ARGV[2], ARGV[1] .. ':rot', ARGV[3])
return {0, f[1], f[2]}
`)

// revokeScript marks a key revoked once. KEYS: 1 keys. ARGV: key id, moment. Reply:
// status, hash, JSON, rotated, revoked.
var revokeScript = goredis.NewScript(`
local f = redis.call('HMGET', KEYS[1], ARGV[1] .. ':h', ARGV[1] .. ':rec', ARGV[1] .. ':rot', ARGV[1] .. ':rev')
if not f[1] then return {1} end
local rev = f[4]
if not rev then
  rev = ARGV[2]
  redis.call('HSET', KEYS[1], ARGV[1] .. ':rev', rev)
end
return {0, f[1], f[2], f[3] or '', rev}
`)

// checkKeyScript returns a key's state: 0 live, 1 unknown, 2 revoked. KEYS: 1 account,
// 2 keys. ARGV: key id (empty for a session), hash.
var checkKeyScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
if ARGV[1] == '' then return 0 end
local k = redis.call('HMGET', KEYS[2], ARGV[1] .. ':h', ARGV[1] .. ':rev')
if k[1] ~= ARGV[2] then return 1 end
if k[2] then return 2 end
return 0
`)

// delIfScript deletes KEYS[1] if it holds ARGV[1]: an index claim is withdrawn only by
// its owner.
var delIfScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)
