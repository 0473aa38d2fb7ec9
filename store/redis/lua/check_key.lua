-- Returns a key's state: 0 live, 1 unknown, 2 revoked. KEYS: 1 account, 2 keys. ARGV:
-- key id (empty for a session), hash, revision. A key whose revision differs has
-- changed since the caller read it: unknown, unless it is revoked.

if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
if ARGV[1] == '' then return 0 end
local k = redis.call('HMGET', KEYS[2], ARGV[1] .. ':h', ARGV[1] .. ':rev', ARGV[1] .. ':v')
if k[1] ~= ARGV[2] then return 1 end
if k[2] then return 2 end
if (k[3] or '0') ~= ARGV[3] then return 1 end
return 0
