-- Returns a key's state: 0 live, 1 unknown, 2 revoked. KEYS: 1 account, 2 keys. ARGV:
-- key id (empty for a session), hash, revision, the account's revision. An account
-- whose revision differs, or a key whose revision differs, has changed since the
-- caller read it: unknown (the key unless it is revoked).

if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
local k = redis.call('HMGET', KEYS[2], 'arev', ARGV[1] .. ':h', ARGV[1] .. ':rev', ARGV[1] .. ':v')
if (k[1] or '0') ~= ARGV[4] then return 1 end
if ARGV[1] == '' then return 0 end
if k[2] ~= ARGV[2] then return 1 end
if k[3] then return 2 end
if (k[4] or '0') ~= ARGV[3] then return 1 end
return 0
