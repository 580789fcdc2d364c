--[[
  Add a job with delay > 0 to `delayed` (docs/protocol.md §4.2), score from
  timestamp + delay, emit `delayed {delay=<absolute due ms>}` and refresh the
  delay marker (also while paused).

  KEYS[1] delayed
  KEYS[2] meta
  KEYS[3] id
  KEYS[4] events
  KEYS[5] marker

  ARGV[1] key prefix
  ARGV[2] JSON job arguments (see includes/store.lua)
  ARGV[3] data JSON

  Returns the job id (the existing one for a duplicate custom id, the owner's
  for a deduplicated add), or -5 (flow parent missing) or -7 (the existing
  job belongs to another live parent).
]]
--- @include "base"
--- @include "markers"
--- @include "scores"
--- @include "remove"
--- @include "dedup"
--- @include "store"

local args = cjson.decode(ARGV[2])
local jobId, duplicate, maxEvents = storeJob(ARGV[1], KEYS[3], KEYS[2], KEYS[4], args, ARGV[3])
if duplicate then
  return jobId
end
local score, due = getDelayedScore(KEYS[1], args["timestamp"], tonumber(args["delay"]))
rcall("ZADD", KEYS[1], score, jobId)
emitTrimmed(KEYS[4], maxEvents, "event", "delayed", "jobId", jobId, "delay", due)
addDelayMarkerIfNeeded(KEYS[5], KEYS[1])
addToParentDependencies(args, ARGV[1], jobId)
return jobId
