-- Records the outcome of a webhook delivery its claim holds (see WebhookStore.Record):
-- counts the attempt and keeps it, if one was made, sets the state, and ends the claim;
-- a delivery no longer pending leaves Q for F and its endpoint's count, and a
-- delivered one moves its endpoint's last success up to the attempt's time.
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 endpoint, 2 message, 3 claim, 4 state, 5 the due
-- time if pending, 6 the attempt's time ('' for no attempt), 7 its status, 8 its
-- error. Reply: 0 recorded, 1 the claim does not hold the delivery, 2 no such
-- delivery.

local ep = ARGV[1]
local field = ep .. '\0' .. ARGV[2]
local v = redis.call('HGET', D, field)
local ev = redis.call('HGET', E, ep)
if not v or not ev then return 2 end
local d = dsplit(v)
if d[6] == '' or d[6] ~= ARGV[3] then return 1 end
redis.call('ZREM', Q, d[3] .. field)
d[1], d[6] = ARGV[4], ''
if ARGV[6] ~= '' then
  d[2], d[4], d[5], d[10] = string.format('%d', tonumber(d[2]) + 1), ARGV[6], ARGV[7], ARGV[8]
  if ARGV[4] == '2' then
    local e = split(ev, 5)
    if e[4] < ARGV[6] then
      e[4] = ARGV[6]
      redis.call('HSET', E, ep, table.concat(e, '\0', 1, 5))
    end
  end
end
if ARGV[4] == '1' then
  d[3] = ARGV[5]
  redis.call('ZADD', Q, 0, d[3] .. field)
else
  d[3] = ''
  redis.call('ZADD', F, 0, finished(d, field))
  redis.call('HINCRBY', P, ep, -1)
end
redis.call('HSET', D, field, djoin(d))
return 0
