-- The balance's reading, for the plain scripts (which renew in prepare.lua; admit.lua and
-- close.lua have their own copy of the renewal, written out).

--#include lib_grants.lua

-- with_balance returns status followed by the stored balance as strings: the allowance
-- part remaining, used, allowance, period start and end (Unix microseconds), the lots'
-- g, gl and gn (see lib_grants.lua), and then what the operation took or kept from the
-- allowance and from the lots (charged, from_lots; '0' if nil).
local function with_balance(status, bal, charged, from_lots)
  local b = redis.call('HMGET', bal, 'rem', 'used', 'allow', 'ps', 'pe', 'g', 'gl', 'gn')
  for i = 1, 8 do
    if not b[i] then b[i] = '0' end
  end
  return {status, b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], charged or '0', from_lots or '0'}
end
