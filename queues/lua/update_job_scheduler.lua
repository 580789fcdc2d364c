--[[
  Produce a scheduler's next iteration when a worker takes the current one
  (BullMQ's worker does this on moving an iteration to active). Only the
  current iteration `repeat:{id}:{ZSCORE repeat id}` may produce: a retried
  or stale iteration does nothing. `every` computes the next run from the
  current one here; cron gets nextMillis from the client. Name and data come
  from the scheduler hash, opts from the producing job.

  KEYS[1] repeat
  KEYS[2] meta
  KEYS[3] id
  KEYS[4] events

  ARGV[1] key prefix
  ARGV[2] now (ms)
  ARGV[3] scheduler id
  ARGV[4] producing job id
  ARGV[5] next millis (cron; "" for `every`)
  ARGV[6] the next iteration's opts JSON

  Returns the new iteration's id; 0 when the scheduler is gone, the producer
  is not the current iteration, or the next iteration exists already (then
  `duplicated` is emitted).
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
local opts = cjson.decode(ARGV[6])
local prevMillis = rcall("ZSCORE", repeatKey, schedulerId)
if not prevMillis or ARGV[4] ~= iterationJobId(schedulerId, prevMillis) then
  return 0
end
local schedulerKey = repeatKey .. ":" .. schedulerId
local attrs = rcall("HMGET", schedulerKey, "name", "data", "every", "startDate", "offset")
local repeatOpts = type(opts["repeat"]) == "table" and opts["repeat"] or {}
local every = tonumber(attrs[3]) or tonumber(repeatOpts["every"])
local nextMillis = tonumber(ARGV[5])
if every then
  nextMillis = everyNextMillis(tonumber(prevMillis), every, now,
    attrs[5] or repeatOpts["offset"] or 0, attrs[4])
end
if not nextMillis then
  return 0
end
local maxEvents = getOrSetMaxEvents(KEYS[2])
local jobId = iterationJobId(schedulerId, nextMillis)
if rcall("EXISTS", prefix .. jobId) == 1 then
  emitTrimmed(KEYS[4], maxEvents, "event", "duplicated", "jobId", jobId)
  return 0
end
rcall("ZADD", repeatKey, nextMillis, schedulerId)
rcall("HINCRBY", schedulerKey, "ic", 1)
rcall("INCR", KEYS[3])
addIterationJob(prefix, schedulerId, jobId, attrs[1] or schedulerId, attrs[2] or "{}", opts,
  math.max(nextMillis - now, 0), now, maxEvents)
return jobId
