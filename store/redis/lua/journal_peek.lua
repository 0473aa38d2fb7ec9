-- Looks at an account's journal for a claim (see journal.go and lib_journal.lua), from
-- its entry in the index of journals. KEYS: 1 the journal's hash, 2 its entries by
-- time. ARGV: 1 the epoch of the entry of the index, 2 its score, 3 before (Unix µs), 4
-- now (Unix µs), 5 the most entries to list, 6 the most entries to look at, 7 a new
-- epoch. Reply: {0} when the journal holds no entry: it is deleted (its epoch with it),
-- and the caller takes the entry of the index out. Otherwise {1, epoch, bound, id,
-- time, ...}: the entries made before ARGV[3] that no claim holds at ARGV[4], oldest
-- first (by time, then id), at most ARGV[5] of them among the first ARGV[6]; and, when
-- epoch is not empty, the entry of the index that the caller writes in place of the
-- one it visited (ZADD LT, the bound its score): the journal's own when the one visited
-- is of another epoch, or a new one at the journal's oldest entry when the one visited
-- is not at it (its oldest entries were removed), so that claims look at the account
-- when it has entries to claim.

local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #first == 0 then
  redis.call('DEL', KEYS[1])
  return {0}
end
local f = redis.call('HMGET', KEYS[1], 'ep', 'eb')
local ep, eb = '', ''
if f[1] and f[2] and f[1] ~= ARGV[1] then
  ep, eb = f[1], f[2]
elseif not (f[1] and f[2]) or tonumber(ARGV[2]) ~= tonumber(first[2]) then
  ep, eb = ARGV[7], first[2]
  redis.call('HSET', KEYS[1], 'ep', ep, 'eb', eb)
end
local out = {1, ep, eb}
local limit, look, now = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[4])
local off, n = 0, 0
while n < limit and off < look do
  local page = redis.call('ZRANGE', KEYS[2], '-inf', '(' .. ARGV[3], 'BYSCORE', 'LIMIT', off, 100, 'WITHSCORES')
  for i = 1, #page, 2 do
    local c = redis.call('HGET', KEYS[1], 'c:' .. page[i])
    if not c or tonumber(c) <= now then
      out[#out + 1] = page[i]
      out[#out + 1] = page[i + 1]
      n = n + 1
      if n == limit then break end
    end
  end
  if #page < 200 then break end
  off = off + 100
end
return out
