--[[
  Add a job to `wait` (docs/protocol.md §4.1): LPUSH, or RPUSH when lifo, plus the
  base marker unless the queue is paused or at its global concurrency.

  KEYS[1] wait
  KEYS[2] meta
  KEYS[3] id
  KEYS[4] events
  KEYS[5] marker
  KEYS[6] active

  ARGV[1] key prefix ("bull:name:")
  ARGV[2] JSON job arguments (see includes/store.lua), with `lifo`
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
if args["lifo"] then
  rcall("RPUSH", KEYS[1], jobId)
else
  rcall("LPUSH", KEYS[1], jobId)
end
addBaseMarkerIfNeeded(KEYS[5], isPausedOrMaxed)
emitTrimmed(KEYS[4], maxEvents, "event", "waiting", "jobId", jobId)
addToParentDependencies(args, ARGV[1], jobId)
return jobId
