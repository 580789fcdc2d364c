--[[
  Add the parent of a flow (docs/protocol.md §4.4): stored like any add (custom id,
  duplicate and non-replace deduplication handling), then ZADD to
  `waiting-children` with score = timestamp and emit `waiting-children`. Its
  children follow in the same transaction, each adding its key to
  `{parent}:dependencies`; a parent that is itself a child is added to its
  own parent's dependencies.

  KEYS[1] meta
  KEYS[2] id
  KEYS[3] events
  KEYS[4] waiting-children

  ARGV[1] key prefix
  ARGV[2] JSON job arguments (see includes/store.lua)
  ARGV[3] data JSON

  Returns the job id (the existing one for a duplicate custom id, the owner's
  for a deduplicated add), or -5 (its own parent missing) or -7 (the existing
  job belongs to another live parent).
]]
--- @include "base"
--- @include "markers"
--- @include "scores"
--- @include "remove"
--- @include "dedup"
--- @include "store"

local args = cjson.decode(ARGV[2])
local jobId, duplicate, maxEvents = storeJob(ARGV[1], KEYS[2], KEYS[1], KEYS[3], args, ARGV[3],
  true)
if duplicate then
  return jobId
end
rcall("ZADD", KEYS[4], args["timestamp"], jobId)
emitTrimmed(KEYS[3], maxEvents, "event", "waiting-children", "jobId", jobId)
addToParentDependencies(args, ARGV[1], jobId)
return jobId
