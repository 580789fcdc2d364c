--[[
  Give an active job back, untouched, to the front of the line (docs/protocol.md
  §4.21, BullMQ's moveJobFromActiveToWait): check the lock, LREM it from
  `active`, then RPUSH it to `wait` (the next one taken), or to the front of
  its priority in `prioritized`, or (a grouped job) to the front of its
  group, whose running count it leaves; emit `waiting {prev=active}`. Its
  attempts (`atm`) are unchanged; `ats` keeps the start the claim counted.

  KEYS[1] wait
  KEYS[2] active
  KEYS[3] prioritized
  KEYS[4] events
  KEYS[5] meta
  KEYS[6] pc
  KEYS[7] marker
  KEYS[8] stalled
  KEYS[9] limiter

  ARGV[1] key prefix
  ARGV[2] job id
  ARGV[3] lock token
  ARGV[4] (optional) a manual rate limit: ms for which the limiter is set
          full (BullMQ's `rateLimit(ms)`: the value 2^53-1, PX ms), once
          the job is back

  Returns the rate limiter's PTTL (0 when none), or -1 missing job, -2 lock
  missing, -3 not active, -6 lock held by another token.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "lock"
--- @include "groups"

local prefix = ARGV[1]
local jobId = ARGV[2]
local jobKey = prefix .. jobId
local code = leaveActive(jobKey, KEYS[2], KEYS[8], ARGV[3], jobId, nil)
if code < 0 then
  return code
end
local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
local gid = jobGroup(jobKey)
if gid then
  groupJobLeft(prefix, gid)
  enqueueGrouped(prefix, jobKey, jobId, gid, priority, false, true)
else
  if priority == 0 then
    rcall("RPUSH", KEYS[1], jobId)
  else
    addJobWithPriority(KEYS[3], priority, jobId, KEYS[6], true)
  end
  addBaseMarkerIfNeeded(KEYS[7], isQueuePausedOrMaxed(KEYS[5], KEYS[2]))
end
emitTrimmed(KEYS[4], getOrSetMaxEvents(KEYS[5]), "event", "waiting", "jobId", jobId,
  "prev", "active")
local limitMs = tonumber(ARGV[4])
if limitMs and limitMs > 0 then
  rcall("SET", KEYS[9], "9007199254740991", "PX", intText(limitMs))
end
local pttl = rcall("PTTL", KEYS[9])
if pttl > 0 then
  return pttl
end
return 0
