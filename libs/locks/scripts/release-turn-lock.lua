--[[
  Release an agent's turn lock, only if the caller still owns it, and take the pending wake-up
  (acquire-turn-lock.lua) that others left while it was held.

  KEYS[1]  the turn lock key
  KEYS[2]  the agent's pending wake-up, in the same hash slot
  ARGV[1]  the caller's token

  Returns: 1 released, 2 released and a pending wake-up was left (look at Postgres again), 0 not the
  owner (nothing deleted)
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1], KEYS[2])
end
return 0
