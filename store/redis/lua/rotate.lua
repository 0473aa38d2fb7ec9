-- Replaces a live key's hash and increases its revision, if the key still has the
-- given revision (a negative one: whatever its revision). KEYS: 1 keys. ARGV: key id,
-- new hash, moment, revision. Reply: status (0 rotated, 1 no key, 2 revoked, 3 another
-- revision), then the old hash, JSON and the new revision when rotated, the current
-- revision when 3. KEYS 2 and 3, ARGV 5 to 10: the journal's (lib_journal.lua); reply
-- {10, epoch} to index the account in the index of journals first.

--#include lib_journal.lua

local f = redis.call('HMGET', KEYS[1], ARGV[1] .. ':h', ARGV[1] .. ':rec', ARGV[1] .. ':rev', ARGV[1] .. ':v')
if not f[1] then return {1} end
if f[3] then return {2} end
local v = f[4] or '0'
if tonumber(ARGV[4]) >= 0 and v ~= ARGV[4] then return {3, v} end
local ep = journal_ready(KEYS[2], 5)
if ep then return {10, ep} end
redis.call('HSET', KEYS[1], ARGV[1] .. ':h', ARGV[2], ARGV[1] .. ':rot', ARGV[3])
v = redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':v', 1)
journal_record(KEYS[2], KEYS[3], 5)
return {0, f[1], f[2], tostring(v)}
