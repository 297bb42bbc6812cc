--[[
  Take the longest-waiting agents from a delivery queue's wake-up set, for the wake job that
  drains it (workers/delivery/drain-wake-ups.ts).

  KEYS[1]  the queue's wake-up set (RedisNames.wakeUps)
  KEYS[2]  the queue's scheduled flag (RedisNames.wakeScheduled), in the same hash slot
  ARGV[1]  at most this many agents
  ARGV[2]  how long the scheduled flag lives, milliseconds
  ARGV[3]  '1': on finding the set empty, clear the flag (the drainer is about to finish);
           '0': keep it set, as 'L' (the drainer lingers and looks again soon: its runs are ending);
           a producer that finds 'L' adds a wake job all the same (add-wake-ups.lua), so a
           wake-up never waits for the linger's poll

  Finding the set empty with ARGV[3] = '1' clears the flag in the same atomic step, so a
  producer adding an agent after this call sets it again and adds a wake job (add-wake-ups.lua):
  no wake-up is left without a job to take it. Taking agents renews it for another ARGV[2] ms: while the drainer
  keeps taking, producers add no job. A drainer that stops taking (all its slots busy, or it
  died) lets the flag expire, and the next wake-up adds a job another worker can take.

  Returns the agent ids taken, oldest first (empty: the set was empty; the flag cleared if asked).
]]
local popped = redis.call('ZPOPMIN', KEYS[1], ARGV[1])
if #popped == 0 then
  if ARGV[3] == '1' then
    redis.call('DEL', KEYS[2])
  else
    redis.call('SET', KEYS[2], 'L', 'PX', ARGV[2])
  end
  return {}
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
local ids = {}
for i = 1, #popped, 2 do
  ids[#ids + 1] = popped[i]
end
return ids
