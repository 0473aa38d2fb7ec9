-- Enqueues a webhook message (see WebhookStore.Enqueue): nothing if its id is in M;
-- else the message, and a pending delivery due now for each endpoint named that exists
-- and has fewer pending deliveries than the bound.
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 the message id, 2 its value in M, 3 its body,
-- 4 its time, 5 its Keep, 6 now, 7 the bound, 8... the endpoints. Reply: {0} not fresh,
-- or {1, the endpoints dropped, each once, in the order given}.

local id = ARGV[1]
if redis.call('HEXISTS', M, id) == 1 then return {0} end
redis.call('HSET', M, id, ARGV[2])
redis.call('HSET', B, id, ARGV[3])
local max = tonumber(ARGV[7])
local dropped, seen, n = {}, {}, 0
for i = 8, #ARGV do
  local ep = ARGV[i]
  if not seen[ep] then
    seen[ep] = true
    if redis.call('HEXISTS', E, ep) == 0 or tonumber(redis.call('HGET', P, ep) or '0') >= max then
      dropped[#dropped + 1] = ep
    else
      local field = ep .. '\0' .. id
      redis.call('HSET', D, field, djoin({'1', '0', ARGV[6], '', '0', '', ARGV[6], ARGV[4], ARGV[5], ''}))
      redis.call('HINCRBY', P, ep, 1)
      redis.call('ZADD', Q, 0, ARGV[6] .. field)
      redis.call('ZADD', L, 0, ep .. '\0' .. ARGV[4] .. id)
      n = n + 1
    end
  end
end
if n > 0 then
  redis.call('HSET', N, id, n)
else
  redis.call('ZADD', O, 0, ARGV[5] .. id)
end
return {1, dropped}
