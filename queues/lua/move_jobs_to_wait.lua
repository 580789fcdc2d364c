--[[
  Bulk move of finished or delayed jobs back to `wait` (docs/protocol.md §4.12 bulk,
  Queue.retryJobs and Queue.promoteJobs): up to `count` ids of the state set
  with score <= timestamp are cleared of their result fields, LPUSHed to
  `wait`, and announced with `waiting {prev=<state>}`. A retried flow child
  becomes a pending dependency of its parent again. As in BullMQ 6.7.0 the
  jobs go to `wait` whatever their priority (Job.retry honours it).

  KEYS[1] events
  KEYS[2] state set (completed, failed or delayed)
  KEYS[3] wait
  KEYS[4] meta
  KEYS[5] marker
  KEYS[6] active

  ARGV[1] key prefix
  ARGV[2] count
  ARGV[3] max score (ms for finished sets; "+inf" for delayed)
  ARGV[4] state name ("completed", "failed" or "delayed")

  Returns 1 when more jobs may remain, 0 when done.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "parents"
--- @include "groups"

local maxEvents = getOrSetMaxEvents(KEYS[4])
local count = tonumber(ARGV[2])
local jobIds = rcall("ZRANGEBYSCORE", KEYS[2], 0, ARGV[3], "LIMIT", 0, count)
if #jobIds == 0 then
  return 0
end
for _, jobId in ipairs(jobIds) do
  local jobKey = ARGV[1] .. jobId
  if ARGV[4] == "failed" then
    rcall("HDEL", jobKey, "finishedOn", "processedOn", "failedReason")
    restoreChildDependency(jobKey, ARGV[4])
  elseif ARGV[4] == "completed" then
    rcall("HDEL", jobKey, "finishedOn", "processedOn", "returnvalue")
    restoreChildDependency(jobKey, ARGV[4])
  end
  emitTrimmed(KEYS[1], maxEvents, "event", "waiting", "jobId", jobId, "prev", ARGV[4])
end
-- Grouped jobs go back to their groups (docs/groups.md), the rest to `wait`.
local plain = {}
for _, jobId in ipairs(jobIds) do
  local jobKey = ARGV[1] .. jobId
  local gid = jobGroup(jobKey)
  if gid then
    rcall("ZREM", KEYS[2], jobId)
    enqueueGrouped(ARGV[1], jobKey, jobId, gid,
      tonumber(rcall("HGET", jobKey, "priority")) or 0, false, false)
  else
    plain[#plain + 1] = jobId
  end
end
for i = 1, #plain, 7000 do
  local last = math.min(i + 6999, #plain)
  rcall("ZREM", KEYS[2], unpack(plain, i, last))
  rcall("LPUSH", KEYS[3], unpack(plain, i, last))
end
addBaseMarkerIfNeeded(KEYS[5], isQueuePausedOrMaxed(KEYS[4], KEYS[6]))
if #jobIds < count then
  return 0
end
return 1
