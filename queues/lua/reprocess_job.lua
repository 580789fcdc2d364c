--[[
  Manual retry of one finished job (wire spec 4.12, Job.retry): ZREM it from
  `completed` or `failed`, clear finishedOn, processedOn and its result (and
  atm/ats when asked), push it to `wait` (LPUSH, RPUSH when lifo; priority
  is ignored as in BullMQ), put it back into its parent's dependencies and
  emit `waiting {prev=<state>}`.

  KEYS[1] job hash
  KEYS[2] events
  KEYS[3] completed or failed (the state it is in)
  KEYS[4] wait
  KEYS[5] meta
  KEYS[6] marker
  KEYS[7] active

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

local jobKey = KEYS[1]
if rcall("EXISTS", jobKey) == 0 then
  return -1
end
if rcall("ZREM", KEYS[3], ARGV[1]) == 0 then
  return -3
end
rcall("HDEL", jobKey, "finishedOn", "processedOn", ARGV[3])
if ARGV[5] == "1" then
  rcall("HDEL", jobKey, "atm", "attemptsMade")
end
if ARGV[6] == "1" then
  rcall("HDEL", jobKey, "ats")
end
if ARGV[2] == "1" then
  rcall("RPUSH", KEYS[4], ARGV[1])
else
  rcall("LPUSH", KEYS[4], ARGV[1])
end
addBaseMarkerIfNeeded(KEYS[6], isQueuePausedOrMaxed(KEYS[5], KEYS[7]))
-- Only a child whose result the parent recorded becomes pending again; one
-- dropped from the dependencies (rdof) stays dropped, as in BullMQ.
local parentKey = rcall("HGET", jobKey, "parentKey")
if parentKey and rcall("EXISTS", parentKey) == 1 then
  local recorded
  if ARGV[4] == "failed" then
    recorded = rcall("ZREM", parentKey .. ":unsuccessful", jobKey) == 1 or
      rcall("HDEL", parentKey .. ":failed", jobKey) == 1
  else
    recorded = rcall("HDEL", parentKey .. ":processed", jobKey) == 1
  end
  if recorded then
    rcall("SADD", parentKey .. ":dependencies", jobKey)
  end
end
emitTrimmed(KEYS[2], getOrSetMaxEvents(KEYS[5]), "event", "waiting", "jobId", ARGV[1],
  "prev", ARGV[4])
return 1
