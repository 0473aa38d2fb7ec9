-- The integer division every script of the limits needs, and admit.lua's only helper.
-- Redis keeps the scripts' globals read-only, so every helper is local.

-- idiv returns floor(a / b) for integers a >= 0, b > 0 below 2^53, exactly: the
-- floating-point quotient may be off by one near an integer, and the remainder says so.
local function idiv(a, b)
  local q = math.floor(a / b)
  local rest = a - q * b
  if rest < 0 then q = q - 1 elseif rest >= b then q = q + 1 end
  return q
end
