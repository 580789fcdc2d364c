--[[
  Retry a failed attempt later (docs/protocol.md §4.8, moveToDelayed): check the lock,
  write the failure fields, LREM from `active`, HINCRBY atm (unless
  skipAttempt), store the relative delay, ZADD to `delayed` (a grouped
  job: `groups:delayed`), emit
  `delayed {delay=<absolute due ms>}` and refresh the delay marker.

  KEYS[1] active
  KEYS[2] delayed
  KEYS[3] events
  KEYS[4] meta
  KEYS[5] marker
  KEYS[6] stalled

  ARGV[1] key prefix
  ARGV[2] now (ms)
  ARGV[3] job id
  ARGV[4] lock token ("0" skips the lock check)
  ARGV[5] delay (ms, relative)
  ARGV[6] JSON flat array of fields to update
  ARGV[7] "1" to skip incrementing atm

  Returns 0, or -1 missing job, -2 lock missing, -3 not active, -6 lock
  held by another token.
]]
--- @include "base"
--- @include "markers"
--- @include "scores"
--- @include "lock"
--- @include "groups"

local jobId = ARGV[3]
local jobKey = ARGV[1] .. jobId
local code = leaveActive(jobKey, KEYS[1], KEYS[6], ARGV[4], jobId,
  cjson.decode(ARGV[6]))
if code < 0 then
  return code
end
local delay = tonumber(ARGV[5])
if ARGV[7] ~= "1" then
  rcall("HINCRBY", jobKey, "atm", 1)
end
rcall("HSET", jobKey, "delay", delay)
local gid = jobGroup(jobKey)
local due
if gid then
  -- A grouped job waits out its backoff where no BullMQ worker looks.
  groupJobLeft(ARGV[1], gid)
  due = tonumber(ARGV[2]) + math.max(delay, 0)
  delayGrouped(ARGV[1], jobKey, jobId, gid, due)
else
  local score
  score, due = getDelayedScore(KEYS[2], ARGV[2], delay)
  rcall("ZADD", KEYS[2], score, jobId)
end
emitTrimmed(KEYS[3], getOrSetMaxEvents(KEYS[4]), "event", "delayed", "jobId", jobId,
  "delay", due)
addDelayMarkerIfNeeded(KEYS[5], KEYS[2])
return 0
