--[[
  Score encodings (docs/protocol.md §1.4).
  Prioritized: priority * 2^32 + (INCR pc mod 2^32); push-back variant uses 0.
  Delayed: due * 4096 plus a counter among jobs due in the same millisecond.
]]
local function getPriorityScore(priority, priorityCounterKey)
  local prioCounter = rcall("INCR", priorityCounterKey)
  return priority * 0x100000000 + prioCounter % 0x100000000
end

local function addJobWithPriority(prioritizedKey, priority, jobId, priorityCounterKey, pushBack)
  local score
  if pushBack then
    score = priority * 0x100000000
  else
    score = getPriorityScore(priority, priorityCounterKey)
  end
  rcall("ZADD", prioritizedKey, score, jobId)
end

local function getDelayedScore(delayedKey, timestamp, delay)
  local due = tonumber(timestamp) + (delay > 0 and delay or 0)
  local minScore = due * 0x1000
  local maxScore = (due + 1) * 0x1000 - 1
  local result = rcall("ZREVRANGEBYSCORE", delayedKey, maxScore, minScore,
    "WITHSCORES", "LIMIT", 0, 1)
  local current = tonumber(result[2])
  if current ~= nil then
    if current >= maxScore then
      return maxScore, due
    end
    return current + 1, due
  end
  return minScore, due
end
