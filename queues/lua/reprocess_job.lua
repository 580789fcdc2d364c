--[[
  Manual retry of one finished job (docs/protocol.md §4.12, Job.retry): ZREM it from
  `completed` or `failed`, clear finishedOn, processedOn and its result (and
  atm/ats when asked), queue it again by its priority as BullMQ 6.7.0 does:
  `prioritized` (new `pc` counter) when it has one, else `wait` (LPUSH, RPUSH
  when lifo), put it back into its parent's dependencies and emit
  `waiting {prev=<state>}`.

  KEYS[1] job hash
  KEYS[2] events
  KEYS[3] completed or failed (the state it is in)
  KEYS[4] wait
  KEYS[5] meta
  KEYS[6] marker
  KEYS[7] active
  KEYS[8] prioritized
  KEYS[9] pc

  ARGV[1] job id
  ARGV[2] "1" when lifo
  ARGV[3] "returnvalue" or "failedReason"
  ARGV[4] "completed" or "failed"
  ARGV[5] "1" to reset attemptsMade
  ARGV[6] "1" to reset attemptsStarted

  Returns 1, or -1 missing job, -3 not in that state.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "parents"
--- @include "groups"

local jobKey = KEYS[1]
local jobId = ARGV[1]
if rcall("EXISTS", jobKey) == 0 then
  return -1
end
if rcall("ZREM", KEYS[3], jobId) == 0 then
  return -3
end
rcall("HDEL", jobKey, "finishedOn", "processedOn", ARGV[3])
if ARGV[5] == "1" then
  rcall("HDEL", jobKey, "atm", "attemptsMade")
end
if ARGV[6] == "1" then
  rcall("HDEL", jobKey, "ats")
end
local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
local gid = jobGroup(jobKey)
if gid then
  -- A grouped job goes back to its group (docs/groups.md), not to `wait`.
  enqueueGrouped(string.sub(KEYS[4], 1, #KEYS[4] - #"wait"), jobKey, jobId, gid,
    priority, ARGV[2] == "1", false)
elseif priority ~= 0 then
  addJobWithPriority(KEYS[8], priority, jobId, KEYS[9], false)
elseif ARGV[2] == "1" then
  rcall("RPUSH", KEYS[4], jobId)
else
  rcall("LPUSH", KEYS[4], jobId)
end
addBaseMarkerIfNeeded(KEYS[6], isQueuePausedOrMaxed(KEYS[5], KEYS[7]))
restoreChildDependency(jobKey, ARGV[4])
emitTrimmed(KEYS[2], getOrSetMaxEvents(KEYS[5]), "event", "waiting", "jobId", jobId,
  "prev", ARGV[4])
return 1
