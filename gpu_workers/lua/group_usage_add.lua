-- One attempt's GPU-seconds added to its group's daily usage, and the
-- group's usage today against its budget (gpu_workers/quota.py).
-- KEYS[1]: the queue's budgets hash (group -> GPU-seconds a UTC day).
-- KEYS[2]: today's usage hash of the queue (group -> GPU-seconds).
-- KEYS[3..]: the usage hashes of the days the attempt ran in.
-- ARGV[1]: the group; ARGV[2]: groups a usage hash holds before the rest
-- fold into ARGV[3] (a group with a budget is always counted as itself);
-- then 2 per KEYS[3..]: GPU-seconds, expire-at (unix s).
-- Returns {used today (string), budget (string) or false}.

local gid = ARGV[1]
local cap = tonumber(ARGV[2])
local budget = redis.call('HGET', KEYS[1], gid)
local i = 4
for k = 3, #KEYS do
  local h, member = KEYS[k], gid
  if not budget and redis.call('HEXISTS', h, gid) == 0
      and redis.call('HLEN', h) >= cap then
    member = ARGV[3]
  end
  redis.call('HINCRBYFLOAT', h, member, ARGV[i])
  redis.call('EXPIREAT', h, tonumber(ARGV[i + 1]))
  i = i + 2
end
return {redis.call('HGET', KEYS[2], gid) or '0', budget or false}
