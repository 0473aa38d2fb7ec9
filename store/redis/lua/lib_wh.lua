-- The webhook outbox (WebhookStore): every key in the hash tag {~wh}, so that every
-- script runs on one Redis Cluster slot. Every webhook script takes the same KEYS, in
-- this order:
--
--   1 E  hash  endpoint id -> "<revision>\0<created>\0<account>\0<last delivered, ''
--              before the first success>\0<JSON of the rest>"
--   2 A  zset  "<account>\0<created><endpoint id>", at score 0: an account's endpoints,
--              oldest first ("" is the operator)
--   3 X  set   the endpoints being deleted: out of E, their deliveries not all gone
--   4 P  hash  endpoint id -> the number of its pending deliveries
--   5 M  hash  message id -> "<at>\0<keep, or '' for none>\0<type>\0<account>"
--   6 B  hash  message id -> its body
--   7 N  hash  message id -> the number of its deliveries (absent for none)
--   8 O  zset  "<keep><message id>": the messages without deliveries, by Keep
--   9 D  hash  "<endpoint id>\0<message id>" -> the delivery (see dsplit)
--  10 Q  zset  "<due><endpoint id>\0<message id>": the pending deliveries, by due time
--  11 F  zset  "<last><endpoint id>\0<message id>": the others, by their last attempt
--  12 L  zset  "<endpoint id>\0<at><message id>": an endpoint's deliveries, by their
--              message's time and id
--  13 S  hash  sweep name -> its claim, the end of its lease and its position (read
--              only by wh_sweep_claim.lua and wh_sweep_record.lua)
--
-- Instants are Unix nanoseconds in 20 digits (a Keep of none is 20 zeros), so that the
-- sorted sets, every member at score 0, order them as text (ZRANGEBYLEX): exactly, to
-- the nanosecond, where a score (a double) would not. Ids hold no NUL byte (the store
-- refuses text with one), which therefore separates the fields.

local E, A, X, P, M, B, N, O, D, Q, F, L =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]

-- split returns the n fields of v separated by NUL bytes, the last holding the rest.
local function split(v, n)
  local out, i = {}, 1
  for k = 1, n - 1 do
    local j = string.find(v, '\0', i, true)
    out[k] = string.sub(v, i, j - 1)
    i = j + 1
  end
  out[n] = string.sub(v, i)
  return out
end

-- A delivery is ten fields: 1 state ('1' pending, '2' delivered, '3' failed),
-- 2 attempts, 3 due time ('' unless pending), 4 the last attempt's time ('' before the
-- first), 5 its status, 6 the claim ('' for none), 7 when it was enqueued, 8 its
-- message's time, 9 its message's Keep, 10 the last attempt's error (last: any text).
local function dsplit(v) return split(v, 10) end
local function djoin(d) return table.concat(d, '\0', 1, 10) end

-- finished returns the member of F of a delivery that is not pending.
local function finished(d, field)
  if d[4] ~= '' then return d[4] .. field end
  return d[7] .. field
end

-- msgof returns the message id of a delivery's field.
local function msgof(field) return string.sub(field, string.find(field, '\0', 1, true) + 1) end

-- whdel deletes the delivery of msg to ep, from every index; a message left with no
-- delivery goes to O, to be forgotten after its Keep.
local function whdel(ep, msg)
  local field = ep .. '\0' .. msg
  local v = redis.call('HGET', D, field)
  if not v then return end
  local d = dsplit(v)
  if d[1] == '1' then
    redis.call('ZREM', Q, d[3] .. field)
    redis.call('HINCRBY', P, ep, -1)
  else
    redis.call('ZREM', F, finished(d, field))
  end
  redis.call('HDEL', D, field)
  redis.call('ZREM', L, ep .. '\0' .. d[8] .. msg)
  if redis.call('HINCRBY', N, msg, -1) <= 0 then
    redis.call('HDEL', N, msg)
    redis.call('ZADD', O, 0, d[9] .. msg)
  end
end

-- drain deletes up to batch deliveries of ep, an endpoint being deleted, and, once it
-- has none, its count and its entry of X. It returns 1 if some may be left, else 0.
local function drain(ep, batch)
  local ms = redis.call('ZRANGEBYLEX', L, '[' .. ep .. '\0', '(' .. ep .. '\1', 'LIMIT', 0, batch)
  for _, m in ipairs(ms) do
    whdel(ep, string.sub(m, #ep + 22))
  end
  if #ms < batch then
    redis.call('SREM', X, ep)
    redis.call('HDEL', P, ep)
    return 0
  end
  return 1
end
