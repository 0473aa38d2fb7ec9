-- The prologue of the plain scripts that operate on a balance (reserve.lua,
-- balance.lua, adjust.lua): it brings the balance to now and to the operation's period
-- in the ledger's order (billing/driver.Ledger): the lots lapsed at now are dropped; if
-- the period starts later than the stored one, the reservations past their deadline by
-- its start (and by now) are voided, in the old period, and the balance is renewed;
-- then those past their deadline at now are voided (void_due.lua). It is a block of
-- code, not a function, as void_block.lua is. It expects the locals balK, useK, openK,
-- base, vttl, vlimit, nowus, and pps, ppe and pallow (the period's start and end, Unix
-- microseconds, and the allowance, as strings), and the helpers of lib_balance.lua; for
-- an account without a balance it ends the script with status 1.

local cur = redis.call('HGET', balK, 'ps')
if not cur then return {1} end
lapse_due(balK, nowus)
if pps + 0 > cur + 0 then
  local vupto = nowus
  if pps + 0 < vupto then vupto = pps + 0 end
  local due = redis.call('HGET', balK, 'nx')
  if due and due + 0 <= vupto then
    --#include void_block.lua
  end
  redis.call('HSET', balK, 'rem', renewed(balK, pallow), 'used', '0', 'allow', pallow, 'ps', pps, 'pe', ppe)
  redis.call('DEL', useK)
end
--#include void_due.lua
