--[[
  Marker protocol (docs/protocol.md §1.4): member "0" score 0 wakes a worker for a
  job ready now; member "1" carries the next delayed due time in ms.
]]
local function addBaseMarkerIfNeeded(markerKey, isPausedOrMaxed)
  if not isPausedOrMaxed then
    rcall("ZADD", markerKey, "0", "0")
  end
end

-- Earliest delayed due time in ms (score / 4096), or nil.
local function getNextDelayedTimestamp(delayedKey)
  local result = rcall("ZRANGE", delayedKey, 0, 0, "WITHSCORES")
  if #result > 0 then
    local nextTimestamp = tonumber(result[2])
    if nextTimestamp ~= nil then
      return nextTimestamp / 0x1000
    end
  end
end

local function addDelayMarkerIfNeeded(markerKey, delayedKey)
  local nextTimestamp = getNextDelayedTimestamp(delayedKey)
  if nextTimestamp ~= nil then
    rcall("ZADD", markerKey, nextTimestamp, "1")
  end
end
