-- The rate limit's GCRA, for the plain scripts; it needs lib_time.lua. admit.lua has its
-- own copy of this arithmetic, written out.

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
