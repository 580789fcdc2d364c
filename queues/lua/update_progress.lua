--[[
  Store a job's progress and emit it (docs/protocol.md §4.10).

  KEYS[1] job hash
  KEYS[2] events
  KEYS[3] meta

  ARGV[1] job id
  ARGV[2] progress JSON (a number or an object)

  Returns 0, or -1 when the job is missing.
]]
--- @include "base"

if rcall("EXISTS", KEYS[1]) == 0 then
  return -1
end
rcall("HSET", KEYS[1], "progress", ARGV[2])
emitTrimmed(KEYS[2], getOrSetMaxEvents(KEYS[3]), "event", "progress", "jobId", ARGV[1],
  "data", ARGV[2])
return 0
