--[[
  Shared locals for every script: the redis.call alias, Redis's clock and the
  event stream trimming length. Included first by every transition.
]]
local rcall = redis.call

-- The queue meta fields scripts read (paused, concurrency, max, duration,
-- opts.maxLenEvents), read with one HMGET per queue and call: a call that
-- changes one of them (pause.lua) forgets its queue's copy.
local metaRead = {}
local function queueMeta(metaKey)
  local meta = metaRead[metaKey]
  if not meta then
    meta = rcall("HMGET", metaKey, "paused", "concurrency", "max", "duration",
      "opts.maxLenEvents")
    metaRead[metaKey] = meta
  end
  return meta
end

-- Read meta `opts.maxLenEvents`, writing the default 10000 when it is missing.
local function getOrSetMaxEvents(metaKey)
  local meta = queueMeta(metaKey)
  local maxEvents = meta[5]
  if not maxEvents then
    maxEvents = 10000
    rcall("HSET", metaKey, "opts.maxLenEvents", maxEvents)
    meta[5] = maxEvents
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

-- Numbers given to redis.call as text: Redis 7.0 writes a Lua number with
-- printf's "%.17g", several microseconds of a call's cost each; "%d" is
-- cheap (integers only).
local function intText(n)
  return string.format("%d", n)
end

-- Redis's own clock in ms: what several hosts' workers set and judge by it
-- (a grouped job's lease) agrees whatever their own clocks say.
local function serverTimeMs()
  local t = rcall("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
