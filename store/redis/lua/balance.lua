-- Renews if due, voids the reservations past their deadline, and reads. KEYS: 1 balance,
-- 2 usage, 3 open reservations. ARGV: 1 period start us, 2 period end us, 3 allowance, 4
-- clock mode, 5 now s, 6 now ns, 7 the markers' base, 8 the voided markers' TTL ms.

--#include lib_time.lua
--#include lib_balance.lua
if not renew(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]) then return {1} end
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[3], ARGV[7], ARGV[8], 64
local nowus = micros(clock(ARGV[4], ARGV[5], ARGV[6]))
--#include void_due.lua
lapse_due(KEYS[1], nowus)
return with_balance(0, KEYS[1])
