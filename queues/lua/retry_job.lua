--[[
  Retry a failed attempt now (docs/protocol.md §4.8, retryJob): promote due delayed
  jobs, check the lock, write the failure fields, LREM from `active`, push
  back to `wait` (LPUSH, RPUSH when lifo) or `prioritized` (a grouped job:
  its group), HINCRBY atm and
  emit `waiting {prev=active}`.

  KEYS[1] wait
  KEYS[2] active
  KEYS[3] prioritized
  KEYS[4] events
  KEYS[5] delayed
  KEYS[6] meta
  KEYS[7] pc
  KEYS[8] marker
  KEYS[9] stalled

  ARGV[1] key prefix
  ARGV[2] now (ms)
  ARGV[3] job id
  ARGV[4] lock token
  ARGV[5] JSON flat array of fields to update
  ARGV[6] "1" when the job is lifo

  Returns 0, or -1 missing job, -2 lock missing, -3 not active, -6 lock
  held by another token.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "promote_delayed"
--- @include "lock"
--- @include "groups"

local prefix = ARGV[1]
local jobId = ARGV[3]
local jobKey = prefix .. jobId
local isPausedOrMaxed = isQueuePausedOrMaxed(KEYS[6], KEYS[2])
promoteDelayedJobs(KEYS[5], KEYS[8], KEYS[1], KEYS[3], KEYS[4], prefix,
  tonumber(ARGV[2]), KEYS[7], isPausedOrMaxed)
local code = leaveActive(jobKey, KEYS[2], KEYS[9], ARGV[4], jobId,
  cjson.decode(ARGV[5]))
if code < 0 then
  return code
end
isPausedOrMaxed = isQueuePausedOrMaxed(KEYS[6], KEYS[2])
local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
local gid = jobGroup(jobKey)
if gid then
  groupJobLeft(prefix, gid)
  enqueueGrouped(prefix, jobKey, jobId, gid, priority, ARGV[6] == "1", false)
elseif priority == 0 then
  if ARGV[6] == "1" then
    rcall("RPUSH", KEYS[1], jobId)
  else
    rcall("LPUSH", KEYS[1], jobId)
  end
else
  addJobWithPriority(KEYS[3], priority, jobId, KEYS[7], false)
end
addBaseMarkerIfNeeded(KEYS[8], isPausedOrMaxed)
rcall("HINCRBY", jobKey, "atm", 1)
emitTrimmed(KEYS[4], getOrSetMaxEvents(KEYS[6]), "event", "waiting", "jobId", jobId,
  "prev", "active")
return 0
