-- Reads the usage counts of period ARGV[1] (start us). KEYS: 1 balance, 2 usage. Reply:
-- status, then API and count pairs.

local ps = redis.call('HGET', KEYS[1], 'ps')
if not ps then return {1} end
if ps ~= ARGV[1] then return {0} end
local r = redis.call('HGETALL', KEYS[2])
table.insert(r, 1, 0)
return r
