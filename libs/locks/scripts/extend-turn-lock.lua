--[[
  Extend an agent's turn lock, only if the caller still owns it.

  KEYS[1]  the turn lock key
  ARGV[1]  the caller's token
  ARGV[2]  new time to live, milliseconds

  Returns: 1 extended, 0 not the owner (the lock expired or was taken over)
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
