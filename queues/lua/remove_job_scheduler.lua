--[[
  Remove a job scheduler: its `repeat` entry and `repeat:{id}` hash, and its
  next iteration when that is still delayed (`removed {prev=delayed}`). An
  iteration already waiting or running is left to finish, as BullMQ does.

  KEYS[1] repeat
  KEYS[2] delayed
  KEYS[3] events

  ARGV[1] key prefix
  ARGV[2] scheduler id

  Returns 0 removed, 1 no such scheduler.
]]
--- @include "base"
--- @include "remove"

local millis = rcall("ZSCORE", KEYS[1], ARGV[2])
if millis then
  local jobId = "repeat:" .. ARGV[2] .. ":" .. millis
  if rcall("ZREM", KEYS[2], jobId) == 1 then
    removeJobKeys(ARGV[1] .. jobId)
    rcall("XADD", KEYS[3], "*", "event", "removed", "jobId", jobId, "prev", "delayed")
  end
end
if rcall("ZREM", KEYS[1], ARGV[2]) == 1 then
  rcall("DEL", KEYS[1] .. ":" .. ARGV[2])
  return 0
end
return 1
