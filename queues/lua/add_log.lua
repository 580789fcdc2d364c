--[[
  Append a line to a job's log (docs/protocol.md §4.11), keeping the last keepLogs
  lines when that is set. No event.

  KEYS[1] job hash
  KEYS[2] job logs list

  ARGV[1] log line
  ARGV[2] keepLogs ("" for all)

  Returns the number of lines kept, or -1 when the job is missing.
]]
--- @include "base"

if rcall("EXISTS", KEYS[1]) == 0 then
  return -1
end
local count = rcall("RPUSH", KEYS[2], ARGV[1])
local keepLogs = tonumber(ARGV[2])
if keepLogs then
  rcall("LTRIM", KEYS[2], -keepLogs, -1)
  return math.min(keepLogs, count)
end
return count
