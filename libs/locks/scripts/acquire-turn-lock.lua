--[[
  Take an agent's turn lock if nobody holds it, and draw the acquisition's fencing number.

  KEYS[1]  the turn lock key (RedisNames.turnLock)
  KEYS[2]  the agent's fence key (RedisNames.turnFence), in the same hash slot as KEYS[1]
  KEYS[3]  the agent's pending wake-up (RedisNames.pendingWakeUp), in the same hash slot
  ARGV[1]  the caller's token (unique per acquisition)
  ARGV[2]  time to live, milliseconds
  ARGV[3]  how long a pending wake-up lives, milliseconds

  The fencing number only grows per agent, even across a wiped Redis: it is the larger of the
  last number + 1 and the server clock in microseconds, so a number drawn after a FLUSHALL is
  still above every number drawn before it (Postgres refuses a reservation with an older one).

  The pending wake-up: a caller that finds the lock held leaves it, so the holder looks at
  Postgres again after releasing (whatever the caller was woken for was committed before this
  call, possibly after the holder's last look). The holder takes it with its release; one
  still there at an acquisition was left for a holder that lost its lock, and only costs the
  new holder one more look after its own release.

  Returns:
    {1, token, fence}   acquired
    {0, holder, pttl}   held by `holder` for `pttl` more milliseconds (a pending wake-up is left)
]]
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- The clock is the new number, and SET ... GET reads the last one in the same command; only a
  -- clock that went back (or two acquisitions in one microsecond) writes again.
  local last = tonumber(redis.call('SET', KEYS[2], string.format('%d', now), 'GET') or '0')
  local fence = now
  if last >= now then
    fence = last + 1
    redis.call('SET', KEYS[2], string.format('%d', fence))
  end
  return {1, ARGV[1], string.format('%d', fence)}
end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
return {0, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
