--[[
  Shared locals for every script: the redis.call alias, Redis's clock and the
  event stream trimming length. Included first by every transition.
]]
local rcall = redis.call

-- Read meta `opts.maxLenEvents`, writing the default 10000 when it is missing.
local function getOrSetMaxEvents(metaKey)
  local maxEvents = rcall("HGET", metaKey, "opts.maxLenEvents")
  if not maxEvents then
    maxEvents = 10000
    rcall("HSET", metaKey, "opts.maxLenEvents", maxEvents)
  end
  return maxEvents
end

-- XADD with MAXLEN ~ maxEvents; `...` are field/value pairs.
local function emitTrimmed(eventsKey, maxEvents, ...)
  rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", ...)
end

local function trimEvents(metaKey, eventsKey)
  local maxEvents = getOrSetMaxEvents(metaKey)
  rcall("XTRIM", eventsKey, "MAXLEN", "~", maxEvents)
end

-- Redis's own clock in ms: what several hosts' workers set and judge by it
-- (a grouped job's lease) agrees whatever their own clocks say.
local function serverTimeMs()
  local t = rcall("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
