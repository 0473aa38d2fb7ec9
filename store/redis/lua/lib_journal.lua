-- The journal of changes (see journal.go): a write that makes a change of management
-- records the entry of its change in its account's journal, in its own script. jK is
-- the journal's hash: ep, the epoch of the account's entry in its shard of the index of
-- journals; eb, a bound that entry's score is at most (absent while the index may not
-- hold it); e:<id>, the change of an entry; c:<id>, the end of its claim (Unix µs). tK
-- is the sorted set of the entries' ids by their time (Unix µs). The write's ARGV, from
-- a: the entry's id ('' for none), its time (Unix µs), its change, the epoch the caller
-- indexed the account under ('' for none), a new epoch, and how long (ms) a journal
-- that holds no entry is kept.

-- journal_ready returns false when the write may record its entry (or has none): the
-- index holds the account at the entry's time or earlier, under the journal's epoch.
-- Otherwise it returns the epoch under which the caller must index the account, at the
-- entry's time, before it runs the write again: the journal's, or, for a journal that
-- has none, the new one, kept for a while if it is never used.
local function journal_ready(jK, a)
  if ARGV[a] == '' then return false end
  local f = redis.call('HMGET', jK, 'ep', 'eb')
  if not f[1] then
    redis.call('HSET', jK, 'ep', ARGV[a + 4])
    if redis.call('HLEN', jK) == 1 then redis.call('PEXPIRE', jK, ARGV[a + 5]) end
    return ARGV[a + 4]
  end
  if f[1] == ARGV[a + 3] or (f[2] and tonumber(f[2]) <= tonumber(ARGV[a + 1])) then return false end
  return f[1]
end

-- journal_record records the entry, once journal_ready allowed it, unless there is none
-- or the journal holds one of its id; and lowers the bound to the entry's time (the
-- caller indexed the account at it, or the bound is lower already).
local function journal_record(jK, tK, a)
  if ARGV[a] == '' then return end
  local eb = redis.call('HGET', jK, 'eb')
  if not eb or tonumber(ARGV[a + 1]) < tonumber(eb) then redis.call('HSET', jK, 'eb', ARGV[a + 1]) end
  if redis.call('HSETNX', jK, 'e:' .. ARGV[a], ARGV[a + 2]) == 1 then
    redis.call('ZADD', tK, ARGV[a + 1], ARGV[a])
  end
  redis.call('PERSIST', jK)
end
