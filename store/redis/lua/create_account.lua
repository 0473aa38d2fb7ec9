-- Stores an account with its primary key. KEYS: 1 account, 2 keys, 3 korder. ARGV:
-- account JSON, key id, hash, key JSON. The keys hash gets the field krev: the
-- account's revoked keys are indexed in krev from the start. KEYS 4 and 5, ARGV 5 to
-- 10: the journal's (lib_journal.lua); reply {10, epoch} to index the account in the
-- index of journals first.

--#include lib_journal.lua

if redis.call('EXISTS', KEYS[1]) == 1 then return 2 end
local ep = journal_ready(KEYS[4], 5)
if ep then return {10, ep} end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2] .. ':h', ARGV[3], ARGV[2] .. ':rec', ARGV[4], 'krev', '1')
redis.call('RPUSH', KEYS[3], ARGV[2])
journal_record(KEYS[4], KEYS[5], 5)
return 0
