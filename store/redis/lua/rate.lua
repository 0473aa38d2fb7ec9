-- Decides (and with ARGV[6] = '1' records) one event; n events at once are one event
-- whose emission interval is n intervals.
--
-- KEYS: 1 rate timestamp. ARGV: 1 clock mode, 2 now s, 3 now ns, 4 emission interval ns,
-- 5 window ns, 6 record. Reply: allowed, remaining, retry ns, reset ns.

--#include lib_time.lua
--#include lib_rate.lua
local s, ns = clock(ARGV[1], ARGV[2], ARGV[3])
local ok, rem, retry, reset, tat, nxt = gcra(KEYS[1], s, ns, tonumber(ARGV[4]), tonumber(ARGV[5]))
if ok == 1 and ARGV[6] == '1' then gcra_store(KEYS[1], tat, nxt) end
return {ok, rem, retry, reset}
