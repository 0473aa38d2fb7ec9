-- Voids the account's reservations open past their deadline at vupto (a number, in the
-- store's clock: now, or, before a renewal, the new period's start if it is earlier), at
-- most vlimit of them, and then keeps in the balance's field nx the earliest deadline
-- still open (none if none). It is a block of code, not a function, so that the hot
-- path's scripts, which include it, pay nothing for it until it runs: it runs only when
-- nx says that a deadline has passed. It expects the locals openK (the account's open
-- reservations, a sorted set of request ids by deadline), balK, useK, base (the markers'
-- names less the request id), nowus (now, at which lots have lapsed), vupto, vlimit and
-- vttl (the voided markers' TTL in ms), and sets vcount, the number voided. A voided
-- reservation's marker becomes "v"; its credits come back and its APIs are uncounted if
-- it was made in the balance's current period; what it took from grant lots (a marker
-- "g", see lib_grants.lua) goes back to them, unless they have lapsed, in any period. It
-- expects the helpers of lib_grants.lua.

local vcount = 0
do
  local ids = redis.call('ZRANGEBYSCORE', openK, '-inf', string.format('%d', vupto), 'LIMIT', 0, vlimit)
  if #ids > 0 then
    local ps = redis.call('HGET', balK, 'ps')
    for _, id in ipairs(ids) do
      local mk = base .. id
      local m = redis.call('GET', mk)
      local amt, rps, apis, plan
      if m then
        amt, rps, apis = string.match(m, '^o (%d+) (%-?%d+) ?(.*)$')
        if not amt then amt, rps, plan, apis = string.match(m, '^g (%d+) (%-?%d+) ([%d:,]+) ?(.*)$') end
      end
      if amt then
        redis.call('SET', mk, 'v', 'PX', vttl)
        local back = amt
        if plan then
          -- What it took from lots goes back to them first (see lib_grants.lua).
          local room = amt + 0
          if rps ~= ps then room = room_of(balK) end
          back = gfmt(give_lots(balK, plan, amt + 0, nowus, room))
        end
        if rps == ps then
          if amt ~= '0' then
            redis.call('HINCRBY', balK, 'rem', back)
            redis.call('HINCRBY', balK, 'used', '-' .. amt)
          end
          for api in string.gmatch(apis, '[^\31]+') do
            local c = redis.call('HGET', useK, api)
            if c and c + 0 > 0 then redis.call('HINCRBY', useK, api, '-1') end
          end
        end
        vcount = vcount + 1
      end
    end
    redis.call('ZREM', openK, unpack(ids))
  end
  local first = redis.call('ZRANGE', openK, 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('HSET', balK, 'nx', first[2])
  else
    redis.call('HDEL', balK, 'nx')
  end
end
