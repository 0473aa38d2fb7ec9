-- Creates a balance. KEYS: 1 balance. ARGV: remaining, allowance, period start us,
-- period end us.

if redis.call('EXISTS', KEYS[1]) == 1 then return 2 end
redis.call('HSET', KEYS[1], 'rem', ARGV[1], 'used', '0', 'allow', ARGV[2], 'ps', ARGV[3], 'pe', ARGV[4])
return 0
