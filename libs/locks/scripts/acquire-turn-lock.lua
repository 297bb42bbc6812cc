--[[
  Take an agent's turn lock if nobody holds it.

  KEYS[1]  the turn lock key (RedisNames.turnLock)
  ARGV[1]  the caller's token (unique per acquisition)
  ARGV[2]  time to live, milliseconds

  Returns:
    {1, token}          acquired
    {0, holder, pttl}   held by `holder` for `pttl` more milliseconds
]]
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, ARGV[1]}
end
return {0, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
