--[[
  Remove a job from whatever state holds it (docs/protocol.md §4.14), by default with
  its children (BullMQ 6.7.0 removeJob, removeChildren: true). Refused for
  the current iteration of a job scheduler, and for a locked job: with
  children, also when any pending descendant (followed through
  `:dependencies`) is locked, so that nothing is removed. Otherwise the id is
  taken out of its structure, detached from its parent (a parent whose last
  dependency this was is released), its keys and dedup key deleted, and
  `removed {prev=<state>}` emitted. With children, first every child the job
  lists (processed, ignored or fpof-failed, pending; in any queue of the
  prefix) is removed the same way, depth first, each with its own `removed`
  event in its own queue; the job itself is not released by its children
  going.

  KEYS[1] job hash
  KEYS[2] events
  KEYS[3] meta

  ARGV[1] key prefix
  ARGV[2] job id
  ARGV[3] now (ms)
  ARGV[4] "1" to remove the children too

  Returns 1 removed, 0 locked, -1 missing, -8 current scheduler iteration.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "remove"
--- @include "parents"
--- @include "groups"

local withChildren = ARGV[4] == "1"
local now = tonumber(ARGV[3])
-- Job keys already walked: broken data with a cycle must not loop.
local seenLocks, seenRemovals = {}, {}

-- "<queue prefix>", "<id>" of a job key, or nil for a malformed one.
local function splitJobKey(jobKey)
  local jobId = string.match(jobKey, ".*:(.*)$")
  if not jobId or jobId == "" then
    return nil
  end
  return string.sub(jobKey, 1, #jobKey - #jobId), jobId
end

local function isLockedTree(jobKey)
  if seenLocks[jobKey] then
    return false
  end
  seenLocks[jobKey] = true
  if rcall("EXISTS", jobKey .. ":lock") == 1 then
    return true
  end
  if withChildren then
    for _, childKey in ipairs(rcall("SMEMBERS", jobKey .. ":dependencies")) do
      if isLockedTree(childKey) then
        return true
      end
    end
  end
  return false
end

local function removeFromAnyState(prefix, jobId)
  local gid = jobGroup(prefix .. jobId)
  if gid then
    if unqueueGrouped(prefix, jobId, gid) then
      return "waiting"
    end
    if rcall("ZREM", prefix .. "groups:delayed", jobId) == 1 then
      return "delayed"
    end
  end
  for _, state in ipairs({"completed", "waiting-children", "delayed", "failed",
      "prioritized"}) do
    if rcall("ZREM", prefix .. state, jobId) == 1 then
      return state
    end
  end
  for _, state in ipairs({"wait", "paused", "active"}) do
    if rcall("LREM", prefix .. state, 0, jobId) > 0 then
      return state
    end
  end
  return "unknown"
end

-- Every child key a parent lists, whatever became of the child.
local function childKeys(jobKey)
  local keys = rcall("HKEYS", jobKey .. ":processed")
  for _, list in ipairs({rcall("HKEYS", jobKey .. ":failed"),
      rcall("ZRANGE", jobKey .. ":unsuccessful", 0, -1),
      rcall("SMEMBERS", jobKey .. ":dependencies")}) do
    for _, key in ipairs(list) do
      keys[#keys + 1] = key
    end
  end
  return keys
end

-- removingParentKey: the parent being removed with this job (it must not be
-- released), or nil for the job asked for.
local function removeTree(prefix, jobId, removingParentKey)
  local jobKey = prefix .. jobId
  if seenRemovals[jobKey] then
    return
  end
  seenRemovals[jobKey] = true
  if removingParentKey then
    rcall("SREM", removingParentKey .. ":dependencies", jobKey)
  else
    -- A pending child that goes away no longer blocks its parent.
    local parentKey = rcall("HGET", jobKey, "parentKey")
    if parentKey and rcall("SREM", parentKey .. ":dependencies", jobKey) == 1 then
      local parentPrefix, parentId = splitJobKey(parentKey)
      if parentPrefix then
        releaseParentIfReady(string.sub(parentPrefix, 1, -2), parentKey, parentId, now,
          false)
      end
    end
  end
  if withChildren then
    for _, childKey in ipairs(childKeys(jobKey)) do
      local childPrefix, childId = splitJobKey(childKey)
      if childPrefix then
        removeTree(childPrefix, childId, jobKey)
      end
    end
  end
  local prev = removeFromAnyState(prefix, jobId)
  removeDeduplicationKey(prefix, jobKey, jobId)
  if removeJobKeys(jobKey) > 0 then
    emitTrimmed(prefix .. "events", getOrSetMaxEvents(prefix .. "meta"), "event", "removed",
      "jobId", jobId, "prev", prev)
  end
end

local prefix = ARGV[1]
local jobId = ARGV[2]
local jobKey = KEYS[1]
if rcall("EXISTS", jobKey) == 0 then
  return -1
end
if isCurrentSchedulerIteration(prefix, jobKey, jobId) then
  return -8
end
if isLockedTree(jobKey) then
  return 0
end
removeTree(prefix, jobId, nil)
return 1
