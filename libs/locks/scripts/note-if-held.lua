--[[
  Whether an agent's turn lock is held; if it is, leave the recheck note its holder takes on
  release (release-turn-lock.lua), in the same atomic step.

  KEYS[1]  the turn lock key
  KEYS[2]  the agent's recheck note, in the same hash slot
  ARGV[1]  how long the note lives, milliseconds

  Returns: 1 held (note left), 0 free (nothing written)
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
  return 1
end
return 0
