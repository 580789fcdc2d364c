--[[
  Claim up to `count` jobs for a worker (docs/protocol.md §4.5 steps 1-9), the body
  shared by move_to_active and the fetch-next path of move_to_finished.
  `contended`: another worker may be blocked on the marker (see
  isMarkerContended); then a queue with a global concurrency or rate limit
  gets one job per call, as a Node worker's fetch, so that one worker cannot
  take every free slot of the limit.
  `q` is a table of queue keys: wait, active, prioritized, events, limiter,
  delayed, meta, pc, marker. `opts`: token (prefix; each job's lock token is
  token .. ":" .. (seq + i - 1)), seq, lockDuration, limiter {max,duration},
  name (worker name, written as `pb`).
  Returns {jobs, rateLimitTtl, nextDelayedMs} where jobs is a flat array of
  (jobId, token, hashArray) triples, and as a second value `true` when the
  queue was paused or maxed before any job was claimed.
  Requires: base, markers, metadata, scores, promote, groups, turns.
]]
-- True when no base marker is waiting to be taken: a worker blocked on the
-- marker would have taken it at once, so only then may one be waiting.
-- Read it before the script adds a marker itself.
local function isMarkerContended(markerKey)
  return not rcall("ZSCORE", markerKey, "0")
end

-- isMarkerContended where its answer counts (a queue with a global
-- concurrency or rate limit, or a worker with a limiter), else false.
local function claimContended(q, opts)
  local meta = queueMeta(q.meta)
  if meta[2] or meta[3] or opts["limiter"] then
    return isMarkerContended(q.marker)
  end
  return false
end

-- The next ungrouped job, from `wait` (tail) then `prioritized`, moved to
-- `active`; skips a deletion marker ("0:...").
local function popUngrouped(q)
  local jobId = rcall("RPOPLPUSH", q.wait, q.active)
  if jobId and string.sub(jobId, 1, 2) == "0:" then
    rcall("LREM", q.active, 1, jobId)
    jobId = rcall("RPOPLPUSH", q.wait, q.active)
  end
  if not jobId then
    local popped = rcall("ZPOPMIN", q.prioritized)
    if #popped > 0 then
      jobId = popped[1]
      rcall("LPUSH", q.active, jobId)
    else
      rcall("DEL", q.pc)
    end
  end
  return jobId
end

-- A Node producer's grouped jobs come in bursts: after one is adopted, the
-- grouped jobs behind it at the tail of `wait` are adopted too (bounded), so
-- their groups take turns from this claim on.
local function adoptTail(q, prefix)
  for _ = 1, GROUP_STEP_LIMIT do
    local jobId = rcall("LINDEX", q.wait, -1)
    if not jobId or string.sub(jobId, 1, 2) == "0:" then
      return
    end
    local jobKey = prefix .. jobId
    local gid = optsGroup(rcall("HGET", jobKey, "opts"))
    if not gid then
      return
    end
    rcall("RPOP", q.wait)
    enqueueGrouped(prefix, jobKey, jobId, gid,
      tonumber(rcall("HGET", jobKey, "priority")) or 0, false, false)
  end
end

-- The next job to claim, moved to `active`: the next ticket's job when the
-- queue has groups (docs/groups.md), else (or on the ungrouped jobs' turn)
-- an ungrouped job. A grouped job met in `wait` (a Node producer's, or one a
-- BullMQ client moved there) is adopted into its group and the turn goes on.
-- Returns jobId and, for a grouped job, its group id; for an ungrouped one,
-- its hash as read (HGETALL) to tell, which the claim then completes.
local function popNext(q, prefix, now, st)
  for _ = 1, GROUP_STEP_LIMIT do
    if st.grouped then
      local jobId, gid = nextGroupedJob(q, prefix, now, st)
      if gid then
        return jobId, gid
      end
    end
    local jobId = popUngrouped(q)
    if not jobId then
      return nil
    end
    local jobKey = prefix .. jobId
    -- Bullpen writes opts.group on every grouped job, so opts alone tells.
    local hash = rcall("HGETALL", jobKey)
    local gid
    for i = 1, #hash, 2 do
      if hash[i] == "opts" then
        gid = optsGroup(hash[i + 1])
        break
      end
    end
    if not gid then
      return jobId, nil, hash
    end
    rcall("LREM", q.active, 1, jobId)
    flushGroupClaims(prefix, st)  -- the tickets and groups as this call left them
    if st.carry then
      st.carry.meta = nil  -- (the adds below change the groups)
    end
    enqueueGrouped(prefix, jobKey, jobId, gid,
      tonumber(rcall("HGET", jobKey, "priority")) or 0, false, false)
    adoptTail(q, prefix)
    st.grouped = true
    st.meta = nil  -- the adds changed the groups: read them again
  end
  return nil
end

local function claimJobs(q, prefix, now, opts, count, contended, carry)
  local isPausedOrMaxed, metaMax, metaDuration = getQueueMetadata(q.meta, q.active)
  promoteDelayedJobs(q.delayed, q.marker, q.wait, q.prioritized, q.events, prefix,
                     now, q.pc, isPausedOrMaxed)
  local st = {grouped = groupsInUse(prefix), taken = {}, activeKey = q.active,
    leaseOwner = opts["token"], carry = carry}
  local groupsNext
  if st.grouped then
    local promoted
    groupsNext, promoted = promoteGroups(prefix, now, q.events, q.meta)
    if promoted and carry then
      carry.meta = nil
    end
  end
  local limiter = opts["limiter"]
  local maxJobs = tonumber(metaMax or (limiter and limiter["max"]))
  local duration = (limiter and limiter["duration"]) or metaDuration
  local concurrency = tonumber(queueMeta(q.meta)[2])
  if contended and (concurrency or maxJobs) then
    -- The marker re-added below lets the next waiting worker claim the next.
    count = math.min(count, 1)
  end
  st.want = count
  local nowText = intText(now)
  local jobs = {}
  local claimed = 0
  while claimed < count do
    local pttl = maxJobs and rateLimitTtl(maxJobs, q.limiter) or 0
    if pttl > 0 then
      if claimed > 0 then
        addBaseMarkerIfNeeded(q.marker, false)
      end
      flushGroupClaims(prefix, st)
      return {jobs, pttl, 0}
    end
    if isPausedOrMaxed then
      if claimed == 0 then
        -- BullMQ answers a paused or maxed queue with no next-delay hint.
        return {jobs, 0, 0}, true
      end
      break
    end
    local jobId, gid, hash = popNext(q, prefix, now, st)
    if not jobId then
      break
    end
    local jobKey = prefix .. jobId
    if not hash then
      -- Read before the claim's writes, which the reply then lists after it.
      hash = rcall("HGETALL", jobKey)
    end
    -- A job claimed only to be failed at once (`defa`) takes no rate-limit
    -- slot, as in BullMQ 6.7.0.
    if maxJobs and rcall("HEXISTS", jobKey, "defa") == 0 then
      if rcall("INCR", q.limiter) == 1 then
        rcall("PEXPIRE", q.limiter, math.floor(math.abs(tonumber(duration) or 0)))
      end
    end
    local token = string.format("%s:%d", opts["token"], opts["seq"] + claimed)
    if gid then
      -- No expiry: a Node worker's stalled check never moves a grouped job;
      -- its worker's lease in `groups:leases` says whether that worker lives.
      rcall("SET", jobKey .. ":lock", token)
      if st.leaseEnd == nil then
        -- A worker whose lease it renewed lately says `leased` (then its
        -- lease ends at least 3/4 of a lock duration from now, and its lock
        -- renewal extends it): kept as it is while it is there.
        if opts["leased"] == 1 and rcall("ZRANK", prefix .. "groups:leases", st.leaseOwner) then
          st.leaseEnd = false
        else
          st.leaseEnd = serverTimeMs() + opts["lockDuration"]
        end
      end
    else
      rcall("SET", jobKey .. ":lock", token, "PX", intText(opts["lockDuration"]))
    end
    rcall("XADD", q.events, "*", "event", "active", "jobId", jobId, "prev", "waiting")
    if opts["name"] then
      rcall("HSET", jobKey, "processedOn", nowText, "pb", opts["name"])
    else
      rcall("HSET", jobKey, "processedOn", nowText)
    end
    local ats = rcall("HINCRBY", jobKey, "ats", "1")
    -- The hash as read before these writes, then the fields they wrote (a
    -- field read before comes again: the reply's later pair wins).
    local n = #hash
    hash[n + 1], hash[n + 2] = "processedOn", nowText
    if opts["name"] then
      hash[n + 3], hash[n + 4] = "pb", tostring(opts["name"])
      n = n + 2
    end
    hash[n + 3], hash[n + 4] = "ats", intText(ats)
    claimed = claimed + 1
    jobs[#jobs + 1] = jobId
    jobs[#jobs + 1] = token
    jobs[#jobs + 1] = hash
    if concurrency and rcall("LLEN", q.active) + #st.taken >= concurrency then
      isPausedOrMaxed = true
    end
  end
  flushGroupClaims(prefix, st)
  if claimed > 0 then
    -- Wake another idle worker so a backlog fans out (docs/protocol.md §4.5 step 8.5).
    addBaseMarkerIfNeeded(q.marker, false)
    return {jobs, 0, 0}
  end
  local nextDelayed = getNextDelayedTimestamp(q.delayed)
  if groupsNext and (not nextDelayed or groupsNext < nextDelayed) then
    nextDelayed = groupsNext
  end
  return {jobs, 0, nextDelayed or 0}
end
