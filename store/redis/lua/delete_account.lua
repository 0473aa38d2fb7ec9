-- Deletes a closed account and its keys. KEYS: 1 account, 2 keys, 3 korder, 4 krev.
-- Reply: status (0 deleted, 1 no account, 2 not closed), then, when deleted, per key
-- (the primary key first) its id, its hash (hex) and its record (JSON), for the caller
-- to delete their index entries. KEYS 5 and 6, ARGV 1 to 6: the journal's
-- (lib_journal.lua), which the deletion keeps; reply {10, epoch} to index the account
-- in the index of journals first.

--#include lib_journal.lua

local rec = redis.call('GET', KEYS[1])
if not rec then return {1} end
if cjson.decode(rec).state ~= 'closed' then return {2} end
local ep = journal_ready(KEYS[5], 1)
if ep then return {10, ep} end
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
journal_record(KEYS[5], KEYS[6], 1)
return out
