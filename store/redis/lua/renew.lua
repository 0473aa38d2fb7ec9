-- Extends a live lease. KEYS and ARGV as acquire.lua without the ceiling: 4 member, 5
-- lease us, 6 set TTL ms. Reply: status.

--#include lib_time.lua
--#include lib_slot.lua
local s, ns = clock(ARGV[1], ARGV[2], ARGV[3])
local nowus = micros(s, ns)
local sc = redis.call('ZSCORE', KEYS[1], ARGV[4])
if not sc or tonumber(sc) <= nowus then
  if sc then redis.call('ZREM', KEYS[1], ARGV[4]) end
  return 1
end
slot_hold(KEYS[1], ARGV[4], nowus + tonumber(ARGV[5]), ARGV[6], true)
return 0
