-- The prologue of the plain scripts that operate on a balance: it voids the account's
-- reservations past their deadline at now (void_block.lua) when nx says one is due. It
-- expects the locals balK, useK, openK, base, vttl, nowus, and vlimit.

local due = redis.call('HGET', balK, 'nx')
if due and due + 0 <= nowus then
  local vupto = nowus
--#include void_block.lua
end
