--[[
  Create or replace a job scheduler (Queue.upsertJobScheduler) and add its
  next iteration. An `every` scheduler computes its next run here (the first
  run is now, or startDate, or the next slot of a given offset; a changed
  `every` restarts the series); a cron scheduler gets nextMillis from the
  client. The iteration of the previous definition is deleted when it has
  not started yet (delayed, prioritized or waiting) and, for an unchanged
  `every`, its slot is reused. An `every` slot taken by an old job moves to
  the following free slot (at most 32 tries).

  KEYS[1] repeat
  KEYS[2] meta
  KEYS[3] id
  KEYS[4] events

  ARGV[1] key prefix
  ARGV[2] now (ms)
  ARGV[3] scheduler id
  ARGV[4] JSON spec: {name, every? | pattern?, nextMillis? (cron), tz?, limit?,
          startDate?, endDate?, offset?, templateOpts (JSON text), opts (the
          iteration's opts, JSON text)}
  ARGV[5] template data JSON

  Returns {jobId, delay}, or -10 (a cron iteration id is taken by another
  job) or -11 (every scanned `every` slot is taken).
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "remove"
--- @include "dedup"
--- @include "store"
--- @include "enqueue"
--- @include "scheduler"

local repeatKey = KEYS[1]
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local schedulerId = ARGV[3]
local spec = cjson.decode(ARGV[4])
local templateData = ARGV[5]
local schedulerKey = repeatKey .. ":" .. schedulerId
local maxEvents = getOrSetMaxEvents(KEYS[2])

local prevMillis = rcall("ZSCORE", repeatKey, schedulerId)
local every = tonumber(spec["every"])
local nextMillis = tonumber(spec["nextMillis"])
local newOffset = spec["offset"] or 0
local everyChanged = false
if every then
  local millis = tonumber(prevMillis)
  if millis and tonumber(rcall("HGET", schedulerKey, "every")) ~= every then
    millis = nil
    everyChanged = true
  end
  nextMillis, newOffset = everyNextMillis(millis, every, now, spec["offset"] or 0,
    spec["startDate"])
end

-- The previous definition's iteration goes unless it already started.
local function removePendingIteration(jobId)
  for _, setKey in ipairs({prefix .. "delayed", prefix .. "prioritized"}) do
    if rcall("ZSCORE", setKey, jobId) then
      removeJob(prefix, jobId)
      rcall("ZREM", setKey, jobId)
      return true
    end
  end
  for _, listKey in ipairs({prefix .. "wait", prefix .. "paused"}) do
    if rcall("LREM", listKey, 1, jobId) > 0 then
      removeJob(prefix, jobId)
      return true
    end
  end
  return false
end

local removedPrev = false
if prevMillis then
  local prevId = iterationJobId(schedulerId, prevMillis)
  if rcall("EXISTS", prefix .. prevId) == 1 then
    removedPrev = removePendingIteration(prevId)
  end
end
if removedPrev then
  if every and not everyChanged then
    nextMillis = tonumber(prevMillis)
  end
else
  spec["offset"] = newOffset
end

local jobId = iterationJobId(schedulerId, nextMillis)
if rcall("EXISTS", prefix .. jobId) == 1 then
  if not every then
    if not removedPrev then
      return -10
    end
  else
    local scanned = 0
    repeat
      nextMillis = nextMillis + every
      jobId = iterationJobId(schedulerId, nextMillis)
      scanned = scanned + 1
    until rcall("EXISTS", prefix .. jobId) == 0 or scanned >= 32
    if rcall("EXISTS", prefix .. jobId) == 1 then
      return -11
    end
  end
end

local delay = math.max(nextMillis - now, 0)
storeScheduler(repeatKey, schedulerId, nextMillis, spec, templateData)
rcall("INCR", KEYS[3])
addIterationJob(prefix, schedulerId, jobId, spec["name"], templateData,
  cjson.decode(spec["opts"]), delay, now, maxEvents)
return {jobId, delay}
