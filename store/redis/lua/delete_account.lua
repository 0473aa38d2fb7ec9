-- Deletes a closed account and its keys. KEYS: 1 account, 2 keys, 3 korder, 4 krev.
-- Reply: status (0 deleted, 1 no account, 2 not closed), then, when deleted, per key
-- (the primary key first) its id, its hash (hex) and its record (JSON), for the caller
-- to delete their index entries.

local rec = redis.call('GET', KEYS[1])
if not rec then return {1} end
if cjson.decode(rec).state ~= 'closed' then return {2} end
local out = {0}
for _, id in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  local f = redis.call('HMGET', KEYS[2], id .. ':h', id .. ':rec')
  if f[1] then
    out[#out + 1] = id
    out[#out + 1] = f[1]
    out[#out + 1] = f[2] or ''
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return out
