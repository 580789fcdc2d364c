--[[
  Deleting jobs: the hash and its sub-keys, the deduplication key that points
  to it, and its entry in a parent's dependencies.
  Requires: base (markers and metadata are included here).
]]
--- @include "markers"
--- @include "metadata"
local function removeJobKeys(jobKey)
  return rcall("DEL", jobKey, jobKey .. ":logs", jobKey .. ":dependencies",
    jobKey .. ":processed", jobKey .. ":failed", jobKey .. ":unsuccessful")
end

local function removeDeduplicationKey(prefix, jobKey, jobId)
  local deid = rcall("HGET", jobKey, "deid")
  if deid then
    local deKey = prefix .. "de:" .. deid
    if rcall("GET", deKey) == jobId then
      rcall("DEL", deKey)
      -- A "next job" stored for this owner (keepLastIfActive) goes with it.
      rcall("DEL", prefix .. "dn:" .. deid)
    end
  end
end

-- Drop the job from its parent's pending dependencies, as BullMQ 6.7.0's bulk
-- removals (clean, drain, a replaced scheduler iteration) do: a parent left
-- with none pending must not wait in waiting-children for ever. One in the
-- job's own queue (`prefix`) is deleted too, its own parent handled the same
-- way; one in another queue is pushed to that queue's `wait` (by RPUSH, no
-- event, whatever its priority, as 6.7.0).
local function removeParentDependency(prefix, jobKey)
  local parentKey = rcall("HGET", jobKey, "parentKey")
  if not parentKey or rcall("EXISTS", parentKey) == 0 then
    return
  end
  local depsKey = parentKey .. ":dependencies"
  if rcall("SREM", depsKey, jobKey) == 0 or rcall("SCARD", depsKey) > 0 then
    return
  end
  local parentId = string.match(parentKey, ".*:(.*)$")
  local parentPrefix = string.sub(parentKey, 1, #parentKey - #parentId)
  if rcall("ZREM", parentPrefix .. "waiting-children", parentId) == 0 then
    return
  end
  if parentPrefix == prefix then
    removeParentDependency(prefix, parentKey)
    removeDeduplicationKey(prefix, parentKey, parentId)
    removeJobKeys(parentKey)
  else
    rcall("RPUSH", parentPrefix .. "wait", parentId)
    addBaseMarkerIfNeeded(parentPrefix .. "marker",
      isQueuePausedOrMaxed(parentPrefix .. "meta", parentPrefix .. "active"))
  end
end

local function removeJob(prefix, jobId)
  local jobKey = prefix .. jobId
  removeParentDependency(prefix, jobKey)
  removeDeduplicationKey(prefix, jobKey, jobId)
  removeJobKeys(jobKey)
end

-- The id of the current iteration of a job scheduler must not be removed.
local function isCurrentSchedulerIteration(prefix, jobKey, jobId)
  local rjk = rcall("HGET", jobKey, "rjk")
  if rjk then
    local score = rcall("ZSCORE", prefix .. "repeat", rjk)
    if score and ("repeat:" .. rjk .. ":" .. score) == jobId then
      return true
    end
  end
  return false
end
