-- Deletes a closed account and its keys. KEYS: 1 account, 2 keys, 3 korder, 4 krev.
-- Reply: status (0 deleted, 1 no account, 2 not closed), then, when deleted, per key
-- its id and its hash (hex), for the caller to delete their index entries.

local rec = redis.call('GET', KEYS[1])
if not rec then return {1} end
if cjson.decode(rec).state ~= 'closed' then return {2} end
local out = {0}
for _, id in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  local h = redis.call('HGET', KEYS[2], id .. ':h')
  if h then
    out[#out + 1] = id
    out[#out + 1] = h
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return out
