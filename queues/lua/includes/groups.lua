--[[
  Groups (docs/groups.md, docs/protocol.md §6.2): grouped jobs wait in their
  group's zset, out of every list a BullMQ worker reads, and workers take
  them in weighted round-robin turns over `groups:ready`. A group is in the
  rotation (field r = "1") at most once; a group found paused, held, at its
  concurrency, rate limited or empty at the head of the rotation is dropped
  from it, and put back by the event that can end that (an add, a finish,
  resume, release, a settings change, or `groups:timed` coming due).
  All keys derive from the queue prefix `P`.
  Requires: base, markers.
]]
local GROUP_SPAN = 0x100000000
--- How many rotation steps or promotions one call takes at most.
local GROUP_STEP_LIMIT = 100

local function groupKey(prefix, gid)
  return prefix .. "group:" .. gid
end

-- Whether the queue has ever had a grouped job (then the claim looks at groups).
local function groupsInUse(prefix)
  return rcall("EXISTS", prefix .. "groups:meta") == 1
end

-- The job's group id when it is a grouped job (hash field `gid`).
local function jobGroup(jobKey)
  -- pcall: the key may be another client's of another type.
  local gid = redis.pcall("HGET", jobKey, "gid")
  if type(gid) == "string" and gid ~= "" then
    return gid
  end
  return nil
end

-- A group id as docs/groups.md allows, or nil.
local function validGroupId(gid)
  if type(gid) ~= "string" or #gid < 1 or #gid > 100 then
    return nil
  end
  if string.find(gid, "^[%w_%.@%+%-/]+$") then
    return gid
  end
  return nil
end

-- The group id in a job's opts JSON (`{"group": {"id": ...}}`), or nil:
-- how a Node BullMQ producer names a job's group.
local function optsGroup(optsJson)
  if not optsJson or not string.find(optsJson, '"group"', 1, true) then
    return nil
  end
  local ok, opts = pcall(cjson.decode, optsJson)
  if ok and type(opts) == "table" and type(opts["group"]) == "table" then
    return validGroupId(opts["group"]["id"])
  end
  return nil
end

local function limitOrNil(value)
  local n = tonumber(value)
  if n and n > 0 then
    return n
  end
  return nil
end

-- The group's state and effective settings (its own over the defaults).
local function groupState(prefix, gid, d)
  local g = rcall("HMGET", groupKey(prefix, gid), "a", "t", "weight",
    "concurrency", "max", "duration", "paused", "hold", "holdUntil", "w")
  return {
    active = tonumber(g[1]) or 0, turns = tonumber(g[2]) or 0,
    weight = limitOrNil(g[3] or d[1]) or 1, concurrency = limitOrNil(g[4] or d[2]),
    max = limitOrNil(g[5] or d[3]), duration = limitOrNil(g[6] or d[4]),
    paused = g[7] == "1", hold = g[8], holdUntil = tonumber(g[9]),
    waiting = tonumber(g[10]),
  }
end

-- The defaults of every group (`groups:meta`), as groupState takes them.
local function groupDefaults(prefix)
  return rcall("HMGET", prefix .. "groups:meta", "weight", "concurrency", "max",
    "duration")
end

-- Wake a blocked worker at `at` ms (the delay marker keeps the earliest).
local function addGroupTimeMarker(prefix, at)
  rcall("ZADD", prefix .. "marker", "LT", at, "1")
end

-- Wake a blocked worker unless the queue is paused.
local function wakeWorker(prefix)
  addBaseMarkerIfNeeded(prefix .. "marker",
    rcall("HEXISTS", prefix .. "meta", "paused") == 1)
end

-- Put a group at the back of the rotation unless it is in it; true when it
-- was not.
local function seatGroup(prefix, gid)
  local key = groupKey(prefix, gid)
  if rcall("HGET", key, "r") == "1" then
    return false
  end
  rcall("HSET", key, "r", "1", "t", 0)
  rcall("RPUSH", prefix .. "groups:ready", gid)
  return true
end

-- Put a group in the rotation, waking a worker, unless it is there: then a
-- claim will meet it (every claim that finds nothing to run has dropped the
-- groups it met, and each return to the rotation wakes a worker).
local function makeGroupReady(prefix, gid)
  if seatGroup(prefix, gid) then
    wakeWorker(prefix)
  end
end

-- Put a stored job in its group's zset: priority order, then `seq` (lifo:
-- newest first; `front`: before every job of its priority, as a stalled job
-- goes back to the head of `wait`). Counts it as waiting.
local function enqueueGrouped(prefix, jobKey, jobId, gid, priority, lifo, front)
  local score
  if front then
    score = priority * GROUP_SPAN - GROUP_SPAN / 2
  else
    local seq = rcall("HINCRBY", prefix .. "groups:meta", "seq", 1)
    if lifo and priority == 0 then
      score = -seq
    else
      score = priority * GROUP_SPAN + seq % GROUP_SPAN
    end
  end
  local key = groupKey(prefix, gid)
  if rcall("ZADD", key .. ":wait", score, jobId) == 1 then
    -- Every grouped waiting job, by when it became ready (lists, oldest).
    local t = rcall("HMGET", jobKey, "timestamp", "delay")
    rcall("ZADD", prefix .. "groups:waiting", (tonumber(t[1]) or 0) + (tonumber(t[2]) or 0),
      jobId)
    local n = rcall("ZCARD", key .. ":wait")
    rcall("ZADD", prefix .. "groups:index", n, gid)
    rcall("HSET", key, "w", n)
  end
  rcall("HSET", jobKey, "gid", gid)
  seatGroup(prefix, gid)
  wakeWorker(prefix)  -- every add wakes a worker, as BullMQ's adds do
end

-- A group with nothing waiting or running, out of the rotation and with
-- nothing set is forgotten (its hash and index entry; a new job makes it
-- again), so the groups of passing customers do not pile up. Its rate
-- window key expires by itself.
local function forgetIdleGroup(prefix, gid)
  local key = groupKey(prefix, gid)
  local g = rcall("HMGET", key, "a", "r", "weight", "concurrency", "max", "duration",
    "paused", "hold")
  if (tonumber(g[1]) or 0) > 0 or g[2] == "1" then
    return
  end
  for i = 3, 8 do
    if g[i] then
      return
    end
  end
  if rcall("ZCARD", key .. ":wait") == 0 then
    rcall("DEL", key)
    rcall("ZREM", prefix .. "groups:index", gid)
  end
end

-- A grouped job left `active` (finished, retried, delayed, stalled): one
-- slot of its group is free again, so the group may take turns again.
-- `leasesDone`: a list collecting the ids whose lease the caller ends.
local function groupJobLeft(prefix, jobId, gid, leasesDone)
  if leasesDone then
    leasesDone[#leasesDone + 1] = jobId  -- the caller ends the leases in one call
  else
    rcall("ZREM", prefix .. "groups:leases", jobId)
  end
  local key = groupKey(prefix, gid)
  if rcall("HINCRBY", key, "a", -1) < 0 then
    rcall("HSET", key, "a", 0)
  end
  if rcall("HGET", key, "r") == "1" then
    return  -- in the rotation: a claim will meet it
  end
  if rcall("ZCARD", key .. ":wait") > 0 then
    makeGroupReady(prefix, gid)
  else
    forgetIdleGroup(prefix, gid)
  end
end

-- Take a waiting grouped job out of its group (removed, promoted elsewhere).
local function unqueueGrouped(prefix, jobId, gid)
  local key = groupKey(prefix, gid)
  if rcall("ZREM", key .. ":wait", jobId) == 1 then
    rcall("ZREM", prefix .. "groups:waiting", jobId)
    local n = rcall("ZCARD", key .. ":wait")
    rcall("ZADD", prefix .. "groups:index", "XX", n, gid)
    rcall("HSET", key, "w", n)
    return true
  end
  return false
end

-- Put a grouped job in `groups:delayed` until `due` ms.
local function delayGrouped(prefix, jobKey, jobId, gid, due)
  rcall("HSETNX", prefix .. "groups:meta", "seq", 0)
  rcall("HSET", jobKey, "gid", gid)
  rcall("ZADD", prefix .. "groups:delayed", due, jobId)
  addGroupTimeMarker(prefix, due)
end

-- The head of a zset scored by ms: its member and score, or nil.
local function firstDue(key)
  local first = rcall("ZRANGE", key, 0, 0, "WITHSCORES")
  if #first > 0 then
    return first[1], tonumber(first[2])
  end
  return nil
end

-- Due grouped delayed jobs to their groups, due timed groups back to the
-- rotation (bounded per call). One peek per zset when nothing is due.
-- Returns the earliest pending time or nil.
local function promoteGroups(prefix, now, eventsKey, metaKey)
  local delayedKey = prefix .. "groups:delayed"
  local _, at = firstDue(delayedKey)
  if at and at <= now then
    local maxEvents = getOrSetMaxEvents(metaKey)
    local due = rcall("ZRANGEBYSCORE", delayedKey, "-inf", now, "LIMIT", 0,
      GROUP_STEP_LIMIT)
    for _, jobId in ipairs(due) do
      rcall("ZREM", delayedKey, jobId)
      local jobKey = prefix .. jobId
      local gid = jobGroup(jobKey)
      if gid then
        local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
        enqueueGrouped(prefix, jobKey, jobId, gid, priority, false, false)
        rcall("HSET", jobKey, "delay", 0)
        emitTrimmed(eventsKey, maxEvents, "event", "waiting", "jobId", jobId, "prev",
          "delayed")
      end
    end
    _, at = firstDue(delayedKey)
  end
  local timedKey = prefix .. "groups:timed"
  local _, timedAt = firstDue(timedKey)
  if timedAt and timedAt <= now then
    local timed = rcall("ZRANGEBYSCORE", timedKey, "-inf", now, "LIMIT", 0,
      GROUP_STEP_LIMIT)
    for _, gid in ipairs(timed) do
      rcall("ZREM", timedKey, gid)
      makeGroupReady(prefix, gid)
    end
    _, timedAt = firstDue(timedKey)
  end
  if timedAt and (not at or timedAt < at) then
    return timedAt
  end
  return at
end

-- Why the group cannot take a turn now (empty aside: the pop tells): nil
-- when it can, else a word and, for a timed reason, the ms when it may again.
local function groupBlocked(prefix, gid, s, now)
  local key = groupKey(prefix, gid)
  if s.paused then
    return "paused"
  end
  if s.hold then
    if not s.holdUntil or s.holdUntil > now then
      return "held", s.holdUntil
    end
    rcall("HDEL", key, "hold", "holdUntil", "holdInfo")
    rcall("SREM", prefix .. "groups:held", gid)
  end
  if s.concurrency and s.active >= s.concurrency then
    return "concurrency"
  end
  if s.max then
    local started = tonumber(rcall("GET", key .. ":limiter") or 0)
    if started >= s.max then
      local pttl = rcall("PTTL", key .. ":limiter")
      if pttl > 0 then
        return "rate", now + pttl
      end
      rcall("DEL", key .. ":limiter")
    end
  end
  return nil
end

-- Drop the group just moved to the tail of the rotation (it is `gid`); a
-- timed reason parks it in `groups:timed` and sets the delay marker; an
-- empty one has no backlog left in the index.
local function dropTailGroup(prefix, gid, untilMs, empty)
  rcall("RPOP", prefix .. "groups:ready")
  rcall("HSET", groupKey(prefix, gid), "r", "0", "t", 0)
  if untilMs then
    rcall("ZADD", prefix .. "groups:timed", untilMs, gid)
    addGroupTimeMarker(prefix, untilMs)
  elseif empty then
    rcall("ZADD", prefix .. "groups:index", "XX", 0, gid)
    forgetIdleGroup(prefix, gid)
  end
end

-- Whether ungrouped jobs wait (in `wait` or `prioritized`).
local function ungroupedWaiting(q)
  return rcall("LLEN", q.wait) > 0 or rcall("ZCARD", q.prioritized) > 0
end

-- Keep the ungrouped jobs' place (`*`) in the rotation while they wait.
local function seatUngrouped(prefix, q)
  local metaKey = prefix .. "groups:meta"
  if ungroupedWaiting(q) and rcall("HGET", metaKey, "u") ~= "1" then
    rcall("HSET", metaKey, "u", "1")
    rcall("RPUSH", prefix .. "groups:ready", "*")
  end
end

-- End of a claim call: the grouped jobs it took go on `active`, leave
-- `groups:waiting` and take their leases, one call each (`st.taken`,
-- `st.leases`; the claim counts `st.taken` as active meanwhile).
local function flushGroupClaims(prefix, st)
  if st.taken and #st.taken > 0 then
    rcall("LPUSH", st.activeKey, unpack(st.taken))
    rcall("ZREM", prefix .. "groups:waiting", unpack(st.taken))
    rcall("ZADD", prefix .. "groups:leases", unpack(st.leases))
    st.taken, st.leases = {}, {}
  end
end

--[[
  The next turn of the rotation. Returns jobId, gid for a grouped job moved
  to `active` (its group's counters taken), or "*" when it is the ungrouped
  jobs' turn (or nothing else can run), or nil when no group can run now.
]]
local function nextGroupedJob(q, prefix, now, st)
  local readyKey = prefix .. "groups:ready"
  if not st.defaults then
    st.defaults = groupDefaults(prefix)
  end
  for _ = 1, GROUP_STEP_LIMIT do
    -- The head takes its turn and goes to the back in one move; it comes
    -- back to the head if its turn goes on (weight > 1), or leaves.
    local gid = rcall("LMOVE", readyKey, readyKey, "LEFT", "RIGHT")
    if not gid then
      return "*"
    end
    if gid == "*" then
      if ungroupedWaiting(q) then
        return "*"
      end
      rcall("RPOP", readyKey)
      rcall("HSET", prefix .. "groups:meta", "u", "0")
    else
      local s = groupState(prefix, gid, st.defaults)
      local blocked, untilMs = groupBlocked(prefix, gid, s, now)
      local key = groupKey(prefix, gid)
      local popped
      if not blocked then
        popped = rcall("ZPOPMIN", key .. ":wait")
      end
      if not popped or #popped == 0 then
        dropTailGroup(prefix, gid, untilMs, not blocked)
      else
        local jobId = popped[1]
        st.taken[#st.taken + 1] = jobId  -- to active, out of groups:waiting
        -- `w` (the group's waiting jobs, set exactly by every add) and `a`
        -- in one write. The index orders groups by backlog for pages (their
        -- counts are read exactly): kept within 16 jobs here, exact when the
        -- group empties.
        local left = s.waiting and math.max(s.waiting - 1, 0) or
          rcall("ZCARD", key .. ":wait")
        if left % 16 == 0 then
          rcall("ZADD", prefix .. "groups:index", "XX", left, gid)
        end
        local turns = s.turns + 1
        if turns >= s.weight then
          turns = 0
        else
          rcall("LMOVE", readyKey, readyKey, "RIGHT", "LEFT")  -- its turn goes on
        end
        if turns ~= s.turns then
          rcall("HSET", key, "a", s.active + 1, "w", left, "t", turns)
        else
          rcall("HSET", key, "a", s.active + 1, "w", left)
        end
        if s.max then
          if rcall("INCR", key .. ":limiter") == 1 then
            rcall("PEXPIRE", key .. ":limiter", s.duration or 1000)
          end
        end
        -- Its turn ends after `weight` jobs. A group now empty or at a limit
        -- is dropped when it next comes round.
        return jobId, gid
      end
    end
  end
  -- Every step dropped a group: let a worker come back for the rest.
  rcall("ZADD", q.marker, 0, "0")
  return nil
end
