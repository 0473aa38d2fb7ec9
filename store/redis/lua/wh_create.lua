-- Creates a webhook endpoint (see WebhookStore.CreateEndpoint) if its id is free and
-- its account holds fewer than the bound.
--
--#include lib_wh.lua
--
-- KEYS: those of lib_wh.lua. ARGV: 1 id, 2 account, 3 creation (20 digits), 4 the
-- endpoint's value in E, 5 the bound. Reply: 0 created, 1 the id is taken, 2 the
-- account is full.

if redis.call('HEXISTS', E, ARGV[1]) == 1 or redis.call('SISMEMBER', X, ARGV[1]) == 1 then return 1 end
if redis.call('ZLEXCOUNT', A, '[' .. ARGV[2] .. '\0', '(' .. ARGV[2] .. '\1') >= tonumber(ARGV[5]) then return 2 end
redis.call('HSET', E, ARGV[1], ARGV[4])
redis.call('ZADD', A, 0, ARGV[2] .. '\0' .. ARGV[3] .. ARGV[1])
return 0
