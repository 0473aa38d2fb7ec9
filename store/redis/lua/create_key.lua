-- Stores a further key, if the account holds fewer keys that count than a limit (live
-- keys, and those revoked at or after an instant: the keys of korder less those that
-- krev holds with an earlier revocation). KEYS: 1 account, 2 keys, 3 korder, 4 krev.
-- ARGV: key id, hash, key JSON, the limit (0: none), the instant from which revoked keys
-- count (Unix µs, or -inf). Reply: 0 stored, 1 no account, 2 the id is taken, 3 the
-- limit refuses the key, 4 the account's revoked keys are not in krev yet (it was
-- created before krev was kept: index them with krev_init.lua, then try again). KEYS 5
-- and 6, ARGV 6 to 11: the journal's (lib_journal.lua); reply {10, epoch} to index the
-- account in the index of journals first.

--#include lib_journal.lua

if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
if redis.call('HEXISTS', KEYS[2], ARGV[1] .. ':h') == 1 then return 2 end
if tonumber(ARGV[4]) > 0 then
  if redis.call('HEXISTS', KEYS[2], 'krev') == 0 then return 4 end
  local n = redis.call('LLEN', KEYS[3]) - redis.call('ZCOUNT', KEYS[4], '-inf', '(' .. ARGV[5])
  if n >= tonumber(ARGV[4]) then return 3 end
end
local ep = journal_ready(KEYS[5], 6)
if ep then return {10, ep} end
redis.call('HSET', KEYS[2], ARGV[1] .. ':h', ARGV[2], ARGV[1] .. ':rec', ARGV[3])
redis.call('RPUSH', KEYS[3], ARGV[1])
journal_record(KEYS[5], KEYS[6], 6)
return 0
