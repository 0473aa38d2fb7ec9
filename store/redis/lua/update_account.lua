-- Replaces the record of an account that is not closed and still has the given
-- revision, and increases the revision. KEYS: 1 account, 2 keys. ARGV: revision, the
-- account's JSON (with the revision after this one). Reply: status (0 updated, 1 no
-- account, 2 closed, 3 another revision), then the current revision when 3. KEYS 3 and
-- 4, ARGV 3 to 8: the journal's (lib_journal.lua); reply {10, epoch} to index the
-- account in the index of journals first.

--#include lib_journal.lua

local rec = redis.call('GET', KEYS[1])
if not rec then return {1} end
if cjson.decode(rec).state == 'closed' then return {2} end
local v = redis.call('HGET', KEYS[2], 'arev') or '0'
if v ~= ARGV[1] then return {3, v} end
local ep = journal_ready(KEYS[3], 3)
if ep then return {10, ep} end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], 'arev', 1)
journal_record(KEYS[3], KEYS[4], 3)
return {0}
