-- The balance's renewal and reading, for the plain scripts. admit.lua and close.lua have
-- their own copy of the renewal, written out.

--#include lib_grants.lua

-- renew applies a due renewal of the balance (period start ps later than the stored
-- one) and reports whether the account has a balance at all.
local function renew(bal, use, ps, pe, allowance)
  local cur = redis.call('HGET', bal, 'ps')
  if not cur then return false end
  if tonumber(ps) > tonumber(cur) then
    redis.call('HSET', bal, 'rem', renewed(bal, allowance), 'used', '0', 'allow', allowance, 'ps', ps, 'pe', pe)
    redis.call('DEL', use)
  end
  return true
end

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
