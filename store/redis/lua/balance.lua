-- Drops the lapsed lots, voids the reservations past their deadline and renews if due
-- (prepare.lua), and reads. KEYS: 1 balance, 2 usage, 3 open reservations. ARGV: 1
-- period start us, 2 period end us, 3 allowance, 4 clock mode, 5 now s, 6 now ns, 7 the
-- markers' base, 8 the voided markers' TTL ms.

--#include lib_time.lua
--#include lib_balance.lua
local balK, useK, openK, base, vttl, vlimit = KEYS[1], KEYS[2], KEYS[3], ARGV[7], ARGV[8], 64
local nowus = micros(clock(ARGV[4], ARGV[5], ARGV[6]))
local pps, ppe, pallow = ARGV[1], ARGV[2], ARGV[3]
--#include prepare.lua
return with_balance(0, KEYS[1])
