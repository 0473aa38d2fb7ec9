-- The concurrency leases, for the plain scripts; it needs lib_time.lua. admit.lua has
-- its own copy, written out.

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
