--[[
  Queue metadata: paused flag, global concurrency and global rate limit.
  Returns isPausedOrMaxed, max, duration.
]]
local function isQueueMaxed(metaKey, activeKey, concurrency)
  if concurrency then
    return rcall("LLEN", activeKey) >= tonumber(concurrency)
  end
  return false
end

-- The limiter's remaining ms once `maxJobs` jobs were counted in its window
-- (BullMQ 6.7.0's getRateLimitTTL): 0 while under it, or when it has no
-- expiry left (a limiter at PTTL 0 is deleted). A manual limit (2^53-1) is
-- over any max.
local function rateLimitTtl(maxJobs, limiterKey)
  if maxJobs <= (tonumber(rcall("GET", limiterKey)) or 0) then
    local pttl = rcall("PTTL", limiterKey)
    if pttl == 0 then
      rcall("DEL", limiterKey)
    end
    if pttl > 0 then
      return pttl
    end
  end
  return 0
end

local function getQueueMetadata(metaKey, activeKey)
  local meta = queueMeta(metaKey)
  if meta[1] then
    return true, meta[3], meta[4]
  end
  return isQueueMaxed(metaKey, activeKey, meta[2]), meta[3], meta[4]
end

-- Paused or maxed only (no limiter fields), for add and requeue paths.
local function isQueuePausedOrMaxed(metaKey, activeKey)
  local meta = queueMeta(metaKey)
  if meta[1] then
    return true
  end
  return isQueueMaxed(metaKey, activeKey, meta[2])
end
