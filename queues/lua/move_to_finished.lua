--[[
  Finish a batch of active jobs (docs/protocol.md §4.7 and the final-failure path of
  4.8), then optionally claim the next jobs in the same call. For each job:
  check the lock, write its fields, LREM it from `active`, add it to
  `completed`/`failed` with finishedOn (or delete it when retention keeps
  none), apply retention by age and count, emit `completed`/`failed` (and
  `retries-exhausted`), release a parent whose last dependency finished,
  turn a deduplicated "next job" (keepLastIfActive) into a job, and count it
  in the per-minute metrics of its target when the worker collects them.
  With the entry's attempt record, push it on the job's attempt history
  (saying `lost` with the code when the finish is refused; the outcome it
  intended is the entry's target).

  KEYS[1] wait
  KEYS[2] active
  KEYS[3] prioritized
  KEYS[4] events
  KEYS[5] limiter
  KEYS[6] delayed
  KEYS[7] meta
  KEYS[8] pc
  KEYS[9] marker
  KEYS[10] stalled
  KEYS[11] completed
  KEYS[12] failed
  KEYS[13] metrics:completed
  KEYS[14] metrics:completed:data
  KEYS[15] metrics:failed
  KEYS[16] metrics:failed:data

  ARGV[1] key prefix
  ARGV[2] now (ms)
  ARGV[3] JSON worker opts (as move_to_active), plus `fetch`: jobs to claim
          (none when the queue has a global concurrency and another
          worker may be waiting), and
          `maxMetricsSize`: data points kept per metrics list (absent:
          no metrics)
  ARGV[4] JSON array of entries {id, token, target ("completed"|"failed"),
          value (returnvalue JSON or raw failedReason), fields (flat array or
          absent), keep {count, age?, limit?}, attempts,
          gid (the job's group as claimed, "" for none; absent: read from the
          hash)}
  With attempt history (absent without):
  ARGV[5] where attempt records go (a job's list: this .. its id), ARGV[6]
          how many a list keeps, ARGV[7] for how long (s)
  ARGV[7 + i] entry i's attempt record ("" without), includes/attempts.lua
          (arguments of their own, not JSON, for speed: queues/ops/worker.py
          finish_args)

  Returns {codes, jobs, rateLimitTtl, nextDelayedMs}: one code per entry
  (0 done, -1 missing job, -2 lock missing, -3 not in active, -4 pending
  dependencies, -6 lock held by another token, -9 failed children), then the
  claimed jobs as in move_to_active.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "promote_delayed"
--- @include "groups"
--- @include "retag"
--- @include "turns"
--- @include "fetch"
--- @include "lock"
--- @include "remove"
--- @include "parents"
--- @include "retention"
--- @include "dedup"
--- @include "store"
--- @include "enqueue"
--- @include "dedup_next"
--- @include "metrics"
--- @include "attempts"

local q = {wait = KEYS[1], active = KEYS[2], prioritized = KEYS[3], events = KEYS[4],
  limiter = KEYS[5], delayed = KEYS[6], meta = KEYS[7], pc = KEYS[8], marker = KEYS[9]}
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local nowText = intText(now)
local opts = cjson.decode(ARGV[3])
local contended = claimContended(q, opts)
local entries = cjson.decode(ARGV[4])
local codes = {}
local trimmed = false
local groupsLeft = {total = 0, order = {}, count = {}}

local function finishOne(e)
  local jobId = e["id"]
  local jobKey = prefix .. jobId
  if rcall("EXISTS", jobKey) == 0 then
    return -1
  end
  local target = e["target"]
  if target == "completed" then
    if rcall("SCARD", jobKey .. ":dependencies") ~= 0 then
      return -4
    end
    if rcall("ZCARD", jobKey .. ":unsuccessful") ~= 0 then
      return -9
    end
  end
  local code = removeLock(jobKey, KEYS[10], e["token"], jobId)
  if code < 0 then
    return code
  end
  updateJobFields(jobKey, e["fields"])
  if rcall("LREM", q.active, "-1", jobId) < 1 then
    return -3
  end
  -- The worker says the group it claimed the job in ("" none): no read.
  local gid = e["gid"]
  if gid == nil then
    gid = jobGroup(jobKey)
  elseif gid == "" then
    gid = nil
  end
  if gid then
    groupJobLeft(prefix, gid, groupsLeft)
  end
  if not trimmed then
    trimEvents(q.meta, q.events)
    trimmed = true
  end
  local attrs = rcall("HMGET", jobKey, "parentKey", "parent", "deid")
  local deid = attrs[3]
  removeDeduplicationKeyOnFinish(prefix, deid, jobId)
  if deid then
    requeueDeduplicatedJob(prefix, deid, now, getOrSetMaxEvents(q.meta))
  end
  local field = "returnvalue"
  if target == "failed" then
    field = "failedReason"
  end
  onChildFinished(prefix, jobKey, target, e["value"], now, attrs)
  local attemptsMade = rcall("HINCRBY", jobKey, "atm", "1")
  local keep = e["keep"] or {}
  local maxCount = keep["count"] or -1
  if maxCount ~= 0 then
    local targetSet = KEYS[11]
    if target == "failed" then
      targetSet = KEYS[12]
    end
    rcall("ZADD", targetSet, nowText, jobId)
    rcall("HSET", jobKey, field, e["value"], "finishedOn", nowText)
    if target == "failed" then
      rcall("HDEL", jobKey, "defa")
    end
    if keep["age"] then
      removeJobsByMaxAge(now, keep["age"], targetSet, prefix, keep["limit"] or 1000)
    end
    if maxCount > 0 then
      removeJobsByMaxCount(now, maxCount, targetSet, prefix)
    end
  else
    removeFinishedJob(prefix, jobId, now)
  end
  rcall("XADD", q.events, "*", "event", target, "jobId", jobId, field, e["value"],
    "prev", "active")
  if target == "failed" and attemptsMade >= (tonumber(e["attempts"]) or 0) then
    rcall("XADD", q.events, "*", "event", "retries-exhausted", "jobId", jobId,
      "attemptsMade", attemptsMade)
  end
  return 0
end

local maxMetricsSize = tonumber(opts["maxMetricsSize"])
if maxMetricsSize and maxMetricsSize < 1 then
  maxMetricsSize = nil
end

local historyKeys = ARGV[5]
local historyKeep = tonumber(ARGV[6])

for i, e in ipairs(entries) do
  codes[i] = finishOne(e)
  local record = historyKeys and ARGV[7 + i]
  if record and record ~= "" then
    pushAttempt(historyKeys .. e["id"], record, e["target"], codes[i], historyKeep,
      ARGV[7])
  end
  if codes[i] == 0 and maxMetricsSize then
    if e["target"] == "failed" then
      collectMetrics(KEYS[15], KEYS[16], maxMetricsSize, now)
    else
      collectMetrics(KEYS[13], KEYS[14], maxMetricsSize, now)
    end
  end
end

-- After grouped jobs, the running count's change and the read of
-- `groups:meta` go on to the claim below (one HMGET, one HINCRBY for both);
-- what it leaves is written after it. (No table without them: a call's
-- garbage costs every call its share of the Lua GC.)
local carry = nil
if groupsLeft.total > 0 then
  carry = {running = 0}
  settleGroupJobs(prefix, groupsLeft, now, carry)
end

-- BullMQ never re-adds a marker when a globally limited queue drops below
-- its concurrency; do it here so idle workers of any client wake up. When
-- one may be waiting, the freed slots are not claimed here: the finishing
-- worker queues for the marker behind the idle ones (Redis serves blocked
-- BZPOPMIN clients in order), so the slots of the cap rotate instead of
-- staying with one worker.
local meta = queueMeta(q.meta)
local concurrency = meta[2]
if concurrency and not meta[1] then
  if rcall("LLEN", q.active) < tonumber(concurrency) and
     (rcall("LLEN", q.wait) > 0 or rcall("ZCARD", q.prioritized) > 0 or
      rcall("EXISTS", prefix .. "groups:q") > 0) then
    addBaseMarkerIfNeeded(q.marker, false)
  end
end

local fetchCount = tonumber(opts["fetch"]) or 0
local claimed, held
if fetchCount > 0 and not (concurrency and contended) then
  claimed, held = claimJobs(q, prefix, now, opts, fetchCount, contended, carry)
end
if carry and carry.running ~= 0 then  -- (what a claim did not write with its own)
  rcall("HINCRBY", prefix .. "groups:meta", "running", carry.running)
end
-- As BullMQ's fetchNextJob: a claim, a rate limit, a paused or maxed queue
-- or a pending delayed job answers the fetch, and no `drained` follows.
if claimed and (#claimed[1] > 0 or claimed[2] > 0 or claimed[3] > 0 or held) then
  return {codes, claimed[1], claimed[2], claimed[3]}
end
if rcall("LLEN", q.wait) == 0 and rcall("LLEN", q.active) == 0 and
   rcall("ZCARD", q.prioritized) == 0 and not groupedWaiting(prefix) then
  rcall("XADD", q.events, "*", "event", "drained")
end
return {codes, {}, 0, getNextDelayedTimestamp(q.delayed) or 0}
