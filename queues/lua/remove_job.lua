--[[
  Remove a job from whatever state holds it (wire spec 4.14): refused for a
  locked job or the current iteration of a job scheduler; otherwise the id is
  taken out of its structure, detached from its parent (a parent whose last
  dependency this was is released), its keys and dedup key deleted, and
  `removed {prev=<state>}` emitted.

  KEYS[1] job hash
  KEYS[2] events
  KEYS[3] meta

  ARGV[1] key prefix
  ARGV[2] job id
  ARGV[3] now (ms)

  Returns 1 removed, 0 locked, -1 missing, -8 current scheduler iteration.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "remove"
--- @include "parents"

local prefix = ARGV[1]
local jobId = ARGV[2]
local jobKey = KEYS[1]
if rcall("EXISTS", jobKey) == 0 then
  return -1
end
if isCurrentSchedulerIteration(prefix, jobKey, jobId) then
  return -8
end
if rcall("EXISTS", jobKey .. ":lock") == 1 then
  return 0
end
local prev = "unknown"
for _, state in ipairs({"completed", "waiting-children", "delayed", "failed", "prioritized"}) do
  if rcall("ZREM", prefix .. state, jobId) == 1 then
    prev = state
    break
  end
end
if prev == "unknown" then
  for _, state in ipairs({"wait", "paused", "active"}) do
    if rcall("LREM", prefix .. state, 0, jobId) > 0 then
      prev = state
      break
    end
  end
end
-- A pending child that goes away no longer blocks its parent.
local parentKey = rcall("HGET", jobKey, "parentKey")
if parentKey and rcall("SREM", parentKey .. ":dependencies", jobKey) == 1 then
  local parentId = string.match(parentKey, ".*:(.*)$")
  local parentQueueKey = string.sub(parentKey, 1, #parentKey - #parentId - 1)
  releaseParentIfReady(parentQueueKey, parentKey, parentId, tonumber(ARGV[3]), false)
end
removeDeduplicationKey(prefix, jobKey, jobId)
removeJobKeys(jobKey)
emitTrimmed(KEYS[2], getOrSetMaxEvents(KEYS[3]), "event", "removed", "jobId", jobId,
  "prev", prev)
return 1
