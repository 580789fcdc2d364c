--[[
  Find which state holds a job (wire spec 4.18, getStateV2 order):
  completed, failed, delayed, prioritized (ZSCORE), then active, wait,
  paused (LPOS), then waiting-children.

  KEYS[1] completed
  KEYS[2] failed
  KEYS[3] delayed
  KEYS[4] prioritized
  KEYS[5] active
  KEYS[6] wait
  KEYS[7] paused
  KEYS[8] waiting-children

  ARGV[1] job id

  Returns the state name, or "unknown".
]]
--- @include "base"

local jobId = ARGV[1]
local names = {"completed", "failed", "delayed", "prioritized"}
for i = 1, 4 do
  if rcall("ZSCORE", KEYS[i], jobId) then
    return names[i]
  end
end
if rcall("LPOS", KEYS[5], jobId) then
  return "active"
end
if rcall("LPOS", KEYS[6], jobId) or rcall("LPOS", KEYS[7], jobId) then
  return "waiting"
end
if rcall("ZSCORE", KEYS[8], jobId) then
  return "waiting-children"
end
return "unknown"
