--[[
  Remove old jobs of one state (docs/protocol.md §4.16, Queue.clean): at most `limit`
  ids (0 = no limit) whose reference time is <= the cutoff. finished sets use
  their score (finishedOn); delayed uses processedOn/timestamp; prioritized
  uses timestamp; wait/paused/active use finishedOn/processedOn/timestamp,
  and active only jobs without a lock. The current iteration of a job
  scheduler is kept unless it has finished. One `cleaned {count}` event per
  call.

  KEYS[1] the state's key
  KEYS[2] events
  KEYS[3] repeat

  ARGV[1] key prefix
  ARGV[2] cutoff timestamp (ms): now - grace
  ARGV[3] limit (0 = no limit)
  ARGV[4] state: wait, paused, active, prioritized, delayed, completed, failed

  Returns the removed ids.
]]
--- @include "base"
--- @include "remove"

local prefix = ARGV[1]
local cutoff = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local state = ARGV[4]
local deleted = {}
-- As 6.7.0: a finished job is cleaned even when it is still the current
-- iteration of its scheduler (one whose limit or end date was reached).
local keepIterations = state ~= "completed" and state ~= "failed"

local function referenceTime(jobKey, fields)
  local values = rcall("HMGET", jobKey, unpack(fields))
  for _, v in ipairs(values) do
    if v then
      return tonumber(v)
    end
  end
end

local function removable(jobId, fields, needUnlocked)
  local jobKey = prefix .. jobId
  if needUnlocked and rcall("EXISTS", jobKey .. ":lock") == 1 then
    return false
  end
  if keepIterations and isCurrentSchedulerIteration(prefix, jobKey, jobId) then
    return false
  end
  if fields then
    local ts = referenceTime(jobKey, fields)
    if ts and ts > cutoff then
      return false
    end
  end
  return true
end

if state == "wait" or state == "paused" or state == "active" then
  local rangeStart = 0
  if limit > 0 then
    -- The tail holds the oldest entries of a FIFO list.
    rangeStart = -limit
  end
  local ids = rcall("LRANGE", KEYS[1], rangeStart, -1)
  local total = rcall("LLEN", KEYS[1])
  local offset = total - #ids
  for i, jobId in ipairs(ids) do
    if removable(jobId, {"finishedOn", "processedOn", "timestamp"}, state == "active") then
      rcall("LSET", KEYS[1], offset + i - 1, "")
      removeJob(prefix, jobId)
      deleted[#deleted + 1] = jobId
    end
  end
  rcall("LREM", KEYS[1], 0, "")
else
  local fields = nil
  local maxScore = "+inf"
  if state == "delayed" then
    fields = {"processedOn", "timestamp"}
  elseif state == "prioritized" then
    fields = {"timestamp"}
  else
    maxScore = cutoff
  end
  local batch = limit > 0 and limit or 1000
  local offset = 0
  while true do
    local ids = rcall("ZRANGEBYSCORE", KEYS[1], "-inf", maxScore, "LIMIT", offset, batch)
    if #ids == 0 then
      break
    end
    local removedHere = 0
    for _, jobId in ipairs(ids) do
      if limit > 0 and #deleted >= limit then
        break
      end
      if removable(jobId, fields, false) then
        removeJob(prefix, jobId)
        rcall("ZREM", KEYS[1], jobId)
        deleted[#deleted + 1] = jobId
        removedHere = removedHere + 1
      end
    end
    if (limit > 0 and #deleted >= limit) or #ids < batch then
      break
    end
    offset = offset + #ids - removedHere
  end
end
rcall("XADD", KEYS[2], "*", "event", "cleaned", "count", #deleted)
return deleted
