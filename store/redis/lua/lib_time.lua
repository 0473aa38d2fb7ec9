-- The arithmetic and the clock of the plain scripts.

--#include lib_idiv.lua
-- fmt formats an integer-valued number below 2^53 without an exponent.
local function fmt(x)
  return string.format('%d', x)
end

-- clock returns now as Unix seconds and nanoseconds: the Redis server's clock (mode
-- 's'), or the caller's, passed in s and ns.
local function clock(mode, s, ns)
  if mode == 's' then
    local t = redis.call('TIME')
    return tonumber(t[1]), tonumber(t[2]) * 1000
  end
  return tonumber(s), tonumber(ns)
end

local function micros(s, ns)
  return s * 1000000 + idiv(ns, 1000)
end
