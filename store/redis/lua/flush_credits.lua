-- The end of admit.lua's runs, and what a step that voids writes first: the debit and
-- the usage counts of the steps since the balance was read (one step's from its own
-- amount and APIs), and the open reservations they made. It is a block of code,
-- included in the script where it runs (see void_block.lua).

if charges == 1 then
  if firstAmt ~= '0' then
    redis.call('HINCRBY', KEYS[5], 'rem', '-' .. firstAmt)
    redis.call('HINCRBY', KEYS[5], 'used', firstAmt)
  end
  if firstAPIs ~= '' then
    if not string.find(firstAPIs, '\31', 1, true) then
      redis.call('HINCRBY', KEYS[6], firstAPIs, '1')
    else
      for api in string.gmatch(firstAPIs, '[^\31]+') do redis.call('HINCRBY', KEYS[6], api, '1') end
    end
  end
elseif charges > 1 then
  if chgHi ~= 0 or chgLo ~= 0 then
    local c = text(chgHi, chgLo)
    redis.call('HINCRBY', KEYS[5], 'rem', '-' .. c)
    redis.call('HINCRBY', KEYS[5], 'used', c)
  end
  -- counts: the charges by list of APIs; an API in several lists is counted for each.
  for list, c in pairs(counts) do
    local cs = string.format('%d', c)
    if not string.find(list, '\31', 1, true) then
      redis.call('HINCRBY', KEYS[6], list, cs)
    else
      for api in string.gmatch(list, '[^\31]+') do redis.call('HINCRBY', KEYS[6], api, cs) end
    end
  end
end
charges, firstAmt, firstAPIs, chgHi, chgLo, counts = 0, nil, nil, 0, 0, nil
if #opened > 0 then
  redis.call('ZADD', KEYS[7], unpack(opened))
  opened = {}
end
