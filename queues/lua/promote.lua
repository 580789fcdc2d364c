--[[
  Promote one delayed job to run now (docs/protocol.md §4.13): ZREM from `delayed`,
  drop a legacy "0:" marker from the head of `wait`, to `wait` (LPUSH) or
  `prioritized`, base marker unless paused or maxed, `waiting {prev=delayed}`,
  hash `delay` = 0.

  KEYS[1] delayed
  KEYS[2] wait
  KEYS[3] prioritized
  KEYS[4] events
  KEYS[5] meta
  KEYS[6] pc
  KEYS[7] marker
  KEYS[8] active

  ARGV[1] key prefix
  ARGV[2] job id

  Returns 0, or -3 when the job is not delayed.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "groups"

local jobId = ARGV[2]
local jobKey = ARGV[1] .. jobId
if rcall("ZREM", KEYS[1], jobId) == 0 then
  local gid = jobGroup(jobKey)
  if not gid or rcall("ZREM", ARGV[1] .. "groups:delayed", jobId) == 0 then
    return -3
  end
  -- A grouped delayed job goes to its group (docs/groups.md).
  enqueueGrouped(ARGV[1], jobKey, jobId, gid,
    tonumber(rcall("HGET", jobKey, "priority")) or 0, false, false)
  rcall("XADD", KEYS[4], "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
  rcall("HSET", jobKey, "delay", 0)
  return 0
end
local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
local head = rcall("LINDEX", KEYS[2], 0)
if head and string.sub(head, 1, 2) == "0:" then
  rcall("LPOP", KEYS[2])
end
if priority == 0 then
  rcall("LPUSH", KEYS[2], jobId)
else
  addJobWithPriority(KEYS[3], priority, jobId, KEYS[6], false)
end
addBaseMarkerIfNeeded(KEYS[7], isQueuePausedOrMaxed(KEYS[5], KEYS[8]))
rcall("XADD", KEYS[4], "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
rcall("HSET", jobKey, "delay", 0)
return 0
