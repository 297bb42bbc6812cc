--[[
  Release an agent's turn lock, only if the caller still owns it.

  KEYS[1]  the turn lock key
  ARGV[1]  the caller's token

  Returns: 1 released, 0 not the owner (nothing deleted)
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
