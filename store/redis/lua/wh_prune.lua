-- Prunes the webhook outbox, a batch at a time (see WebhookStore.Prune): the
-- deliveries not pending whose last attempt is before an instant, then the messages
-- without deliveries whose Keep is before it, then a batch of the deliveries of an
-- endpoint whose deletion stopped half-way. The caller runs it again while some may be
-- left.
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 the instant, 2 the batch. Reply: {the deliveries
-- pruned, 1 if some may be left}.

local batch = tonumber(ARGV[2])
local done = redis.call('ZRANGEBYLEX', F, '-', '(' .. ARGV[1], 'LIMIT', 0, batch)
for _, m in ipairs(done) do
  local field = string.sub(m, 21)
  local msg = msgof(field)
  whdel(string.sub(field, 1, #field - #msg - 1), msg)
end
local gone = redis.call('ZRANGEBYLEX', O, '-', '(' .. ARGV[1], 'LIMIT', 0, batch)
for _, m in ipairs(gone) do
  local msg = string.sub(m, 21)
  if redis.call('HEXISTS', N, msg) == 0 then
    redis.call('HDEL', M, msg)
    redis.call('HDEL', B, msg)
  end
  redis.call('ZREM', O, m)
end
local more = 0
if #done == batch or #gone == batch then more = 1 end
local ep = redis.call('SRANDMEMBER', X)
if ep and drain(ep, batch) == 1 then more = 1 end
if redis.call('SCARD', X) > 0 then more = 1 end
return {#done, more}
