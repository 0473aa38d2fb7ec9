-- Creates a balance: up to the allowance, the opening balance is the period's
-- allowance part; the rest is a lot that never lapses (see lib_grants.lua). KEYS: 1
-- balance. ARGV: remaining, allowance, period start us, period end us.

if redis.call('EXISTS', KEYS[1]) == 1 then return 2 end
local total, allow = tonumber(ARGV[1]), tonumber(ARGV[2])
local rem = total
if allow < rem then rem = allow end
if rem < 0 then rem = 0 end
redis.call('HSET', KEYS[1], 'rem', string.format('%d', rem), 'used', '0', 'allow', ARGV[2], 'ps', ARGV[3], 'pe', ARGV[4])
if total > rem then
  local g = string.format('%d', total - rem)
  redis.call('HSET', KEYS[1], 'L0', g, 'g', g)
end
return 0
