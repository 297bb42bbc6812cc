--[[
  Whether agents' turn locks are held; for each that is, leave the pending wake-up its holder
  takes on release (release-turn-lock.lua), in the same atomic step.

  KEYS     pairs, one per agent: KEYS[2i-1] the agent's turn lock key, KEYS[2i] its pending
           wake-up (same hash slot). On a cluster every call names one agent; on one server a
           producer names all the agents of its batch in one call.
  ARGV[1]  how long a pending wake-up lives, milliseconds

  Returns: per agent, in order, 1 held (pending wake-up left) or 0 free (nothing written)
]]
local out = {}
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('SET', KEYS[i + 1], '1', 'PX', ARGV[1])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
