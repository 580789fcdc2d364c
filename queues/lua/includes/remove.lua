--[[
  Deleting jobs: the hash and its sub-keys, the deduplication key that points
  to it, and its entry in a parent's dependencies.
  Requires: base.
]]
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

-- Drop the job from its parent's pending dependencies (soft: the parent is
-- left where it is; flows release parents in their own scripts).
local function removeParentDependency(jobKey)
  local parentKey = rcall("HGET", jobKey, "parentKey")
  if parentKey then
    rcall("SREM", parentKey .. ":dependencies", jobKey)
  end
end

local function removeJob(prefix, jobId)
  local jobKey = prefix .. jobId
  removeParentDependency(jobKey)
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
