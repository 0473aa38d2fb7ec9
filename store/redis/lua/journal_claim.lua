-- Claims entries of an account's journal (see lib_journal.lua) that no claim holds at
-- now: each is held until the claim's end. KEYS: 1 the journal's hash, 2 its entries by
-- time. ARGV: 1 now (Unix µs), 2 the end of the claim (Unix µs), 3... the entries' ids.
-- Reply: {id, time (Unix µs), change, ...} of the entries claimed; an id of no entry,
-- or of one another claim holds, is left out.

local out = {}
local now = tonumber(ARGV[1])
for i = 3, #ARGV do
  local at = redis.call('ZSCORE', KEYS[2], ARGV[i])
  if at then
    local f = redis.call('HMGET', KEYS[1], 'c:' .. ARGV[i], 'e:' .. ARGV[i])
    if f[2] and (not f[1] or tonumber(f[1]) <= now) then
      redis.call('HSET', KEYS[1], 'c:' .. ARGV[i], ARGV[2])
      out[#out + 1] = ARGV[i]
      out[#out + 1] = at
      out[#out + 1] = f[2]
    end
  end
end
return out
