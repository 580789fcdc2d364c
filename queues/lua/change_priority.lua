--[[
  Change a job's priority (docs/protocol.md §4.19): a job waiting in `wait` or
  `prioritized` is re-queued under the new priority (lifo puts it first
  among equals); any job gets the new `priority` field. No event.

  KEYS[1] wait
  KEYS[2] prioritized
  KEYS[3] meta
  KEYS[4] marker
  KEYS[5] pc
  KEYS[6] active
  KEYS[7] job hash

  ARGV[1] new priority
  ARGV[2] job id
  ARGV[3] "1" for lifo

  Returns 1, or -1 when the job is missing.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "groups"

local jobId = ARGV[2]
local priority = tonumber(ARGV[1])
if rcall("EXISTS", KEYS[7]) == 0 then
  return -1
end
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #"wait")
local gid = jobGroup(KEYS[7])
if gid and unqueueGrouped(prefix, jobId, gid) then
  -- A grouped job keeps its place among its group's jobs of that priority.
  rcall("HSET", KEYS[7], "priority", priority)
  enqueueGrouped(prefix, KEYS[7], jobId, gid, priority, ARGV[3] == "1", false)
  return 1
end
if rcall("ZREM", KEYS[2], jobId) > 0 or rcall("LREM", KEYS[1], -1, jobId) > 0 then
  if priority == 0 then
    if ARGV[3] == "1" then
      rcall("RPUSH", KEYS[1], jobId)
    else
      rcall("LPUSH", KEYS[1], jobId)
    end
  else
    addJobWithPriority(KEYS[2], priority, jobId, KEYS[5], ARGV[3] == "1")
  end
  addBaseMarkerIfNeeded(KEYS[4], isQueuePausedOrMaxed(KEYS[3], KEYS[6]))
end
rcall("HSET", KEYS[7], "priority", priority)
return 1
