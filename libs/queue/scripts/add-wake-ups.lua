--[[
  Add agents to a delivery queue's wake-up set, and mark the queue scheduled if nobody is draining it.

  KEYS[1]  the queue's wake-up set (RedisNames.wakeUps): agent id -> when it was first woken
           (the server clock in microseconds, so calls from different processes order right)
  KEYS[2]  the queue's scheduled flag (RedisNames.wakeScheduled), in the same hash slot
  ARGV[1]  how long the scheduled flag lives, milliseconds
  ARGV[2..] agent ids

  An agent already in the set keeps its place (NX): it needs one look at its queue in Postgres,
  however many wake-ups it got, and the run that takes it delivers whatever is next.

  Returns 1 when this call marked the queue scheduled (the caller adds one wake job: nobody was going to
  take these agents), 0 when the queue was already scheduled (a wake job is queued or draining, and
  takes them before it finishes: take-wake-ups.lua clears the flag only on finding the set empty).
  A flag of 'L' says the drainer found the set empty and only lingers (it looks again within its
  linger poll): this call then marks the queue scheduled ('1') and returns 1 too, so the caller's
  job takes these agents at once instead of after the poll. Only the first wake-up of a linger adds a job.
]]
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local n = #ARGV
local i = 2
while i <= n do
  local args = {}
  local last = math.min(n, i + 499)
  for j = i, last do
    args[#args + 1] = now
    args[#args + 1] = ARGV[j]
  end
  redis.call('ZADD', KEYS[1], 'NX', unpack(args))
  i = last + 1
end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then
  return 1
end
if redis.call('GET', KEYS[2]) == 'L' then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
  return 1
end
return 0
