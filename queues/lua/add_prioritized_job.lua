--[[
  Add a job with priority > 0 to `prioritized` (docs/protocol.md §4.3), score
  priority * 2^32 + counter, plus the base marker unless paused or maxed.

  KEYS[1] prioritized
  KEYS[2] meta
  KEYS[3] id
  KEYS[4] events
  KEYS[5] marker
  KEYS[6] active
  KEYS[7] pc (priority counter)

  ARGV[1] key prefix
  ARGV[2] JSON job arguments (see includes/store.lua)
  ARGV[3] data JSON

  Returns the job id (the existing one for a duplicate custom id, the owner's
  for a deduplicated add), or -5 (flow parent missing) or -7 (the existing
  job belongs to another live parent).
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "remove"
--- @include "dedup"
--- @include "store"

local args = cjson.decode(ARGV[2])
local jobId, duplicate, maxEvents = storeJob(ARGV[1], KEYS[3], KEYS[2], KEYS[4], args, ARGV[3])
if duplicate then
  return jobId
end
local isPausedOrMaxed = isQueuePausedOrMaxed(KEYS[2], KEYS[6])
addJobWithPriority(KEYS[1], tonumber(args["priority"]), jobId, KEYS[7], false)
addBaseMarkerIfNeeded(KEYS[5], isPausedOrMaxed)
emitTrimmed(KEYS[4], maxEvents, "event", "waiting", "jobId", jobId)
addToParentDependencies(args, ARGV[1], jobId)
return jobId
