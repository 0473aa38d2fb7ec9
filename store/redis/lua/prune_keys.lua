-- Deletes the keys of an account revoked before an instant, but its primary key (which
-- stays in krev). KEYS: 1 keys, 2 korder, 3 krev. ARGV: the instant (Unix µs). Reply: per
-- deleted key, its id, its hash (hex) and its record (JSON), for the caller to delete
-- their index entries.

local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[1])) do
  local f = redis.call('HMGET', KEYS[1], id .. ':h', id .. ':rec')
  if not (f[2] and cjson.decode(f[2]).primary) then
    redis.call('HDEL', KEYS[1], id .. ':h', id .. ':rec', id .. ':rot', id .. ':rev', id .. ':v')
    redis.call('LREM', KEYS[2], 1, id)
    redis.call('ZREM', KEYS[3], id)
    if f[1] then
      out[#out + 1] = id
      out[#out + 1] = f[1]
      out[#out + 1] = f[2] or ''
    end
  end
end
return out
