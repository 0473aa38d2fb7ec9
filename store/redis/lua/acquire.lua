-- Grants or renews a slot.
--
-- KEYS: 1 leases. ARGV: 1 clock mode, 2 now s, 3 now ns, 4 member, 5 ceiling, 6 lease
-- us, 7 set TTL ms. Reply: acquired, in use.

--#include lib_time.lua
--#include lib_slot.lua
local s, ns = clock(ARGV[1], ARGV[2], ARGV[3])
local nowus = micros(s, ns)
local ok, n = slot_check(KEYS[1], ARGV[4], tonumber(ARGV[5]), nowus)
if not ok then return {0, n} end
slot_hold(KEYS[1], ARGV[4], nowus + tonumber(ARGV[6]), ARGV[7], n > 1)
return {1, n}
