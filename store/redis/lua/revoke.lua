-- Marks a key revoked once, increasing its revision then, if the key still has the
-- given revision (a negative one: whatever its revision), and adds it to krev with the
-- moment of its revocation. KEYS: 1 keys, 2 krev. ARGV: key id, moment, revision, the
-- moment as Unix µs. Reply: status (0 revoked or already revoked, 1 no key, 3 another
-- revision), then hash, JSON, rotated, revoked, revision when 0, the current revision
-- when 3. KEYS 3 and 4, ARGV 5 to 10: the journal's (lib_journal.lua), whose entry is
-- recorded by a revocation of a revoked key too; reply {10, epoch} to index the
-- account in the index of journals first.

--#include lib_journal.lua

local f = redis.call('HMGET', KEYS[1], ARGV[1] .. ':h', ARGV[1] .. ':rec', ARGV[1] .. ':rot', ARGV[1] .. ':rev', ARGV[1] .. ':v')
if not f[1] then return {1} end
local rev, v = f[4], f[5] or '0'
if tonumber(ARGV[3]) >= 0 and v ~= ARGV[3] then return {3, v} end
local ep = journal_ready(KEYS[3], 5)
if ep then return {10, ep} end
if not rev then
  rev = ARGV[2]
  redis.call('HSET', KEYS[1], ARGV[1] .. ':rev', rev)
  v = tostring(redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':v', 1))
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
journal_record(KEYS[3], KEYS[4], 5)
return {0, f[1], f[2], f[3] or '', rev, v}
