-- The end of admit.lua's runs, and what a step that voids writes first: the debit and
-- the usage counts of the steps since the balance was read (one step's from its own
-- arguments), and the open reservations they made. It is a block of code, included in
-- the script where it runs (see void_block.lua).

if charges == 1 then
  local amt = ARGV[first + 13]
  if amt ~= '0' then
    redis.call('HINCRBY', KEYS[5], 'rem', '-' .. amt)
    redis.call('HINCRBY', KEYS[5], 'used', amt)
  end
  for j = first + 21, first + 20 + ARGV[first + 20] do redis.call('HINCRBY', KEYS[6], ARGV[j], '1') end
elseif charges > 1 then
  if chgHi ~= 0 or chgLo ~= 0 then
    local c = text(chgHi, chgLo)
    redis.call('HINCRBY', KEYS[5], 'rem', '-' .. c)
    redis.call('HINCRBY', KEYS[5], 'used', c)
  end
  for api, c in pairs(counts) do redis.call('HINCRBY', KEYS[6], api, string.format('%d', c)) end
end
charges, first, chgHi, chgLo, counts = 0, nil, 0, 0, nil
if #opened > 0 then
  redis.call('ZADD', KEYS[7], unpack(opened))
  opened = {}
end
