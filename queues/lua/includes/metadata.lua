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
