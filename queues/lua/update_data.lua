--[[
  Replace a job's data (Job.updateData).

  KEYS[1] job hash

  ARGV[1] data JSON

  Returns 0, or -1 when the job is missing.
]]
--- @include "base"

if rcall("EXISTS", KEYS[1]) == 0 then
  return -1
end
rcall("HSET", KEYS[1], "data", ARGV[1])
return 0
