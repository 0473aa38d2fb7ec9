-- The balance's renewal and reading, for the plain scripts. admit.lua and close.lua have
-- their own copy of the renewal, written out.

-- renew applies a due renewal of the balance (period start ps later than the stored
-- one) and reports whether the account has a balance at all.
local function renew(bal, use, ps, pe, allowance)
  local cur = redis.call('HGET', bal, 'ps')
  if not cur then return false end
  if tonumber(ps) > tonumber(cur) then
    redis.call('HSET', bal, 'rem', allowance, 'used', '0', 'allow', allowance, 'ps', ps, 'pe', pe)
    redis.call('DEL', use)
  end
  return true
end

-- with_balance returns status followed by the stored balance as strings: remaining,
-- used, allowance, period start and end (Unix microseconds).
local function with_balance(status, bal)
  local b = redis.call('HMGET', bal, 'rem', 'used', 'allow', 'ps', 'pe')
  for i = 1, 5 do
    if not b[i] then b[i] = '0' end
  end
  return {status, b[1], b[2], b[3], b[4], b[5]}
end
