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
local function groupState(prefix, gid)
  local g = rcall("HMGET", groupKey(prefix, gid), "a", "r", "t", "weight",
    "concurrency", "max", "duration", "paused", "hold", "holdUntil")
  local d = rcall("HMGET", prefix .. "groups:meta", "weight", "concurrency", "max",
    "duration")
  return {
    active = tonumber(g[1]) or 0, ready = g[2] == "1", turns = tonumber(g[3]) or 0,
    weight = limitOrNil(g[4] or d[1]) or 1, concurrency = limitOrNil(g[5] or d[2]),
    max = limitOrNil(g[6] or d[3]), duration = limitOrNil(g[7] or d[4]),
    paused = g[8] == "1", hold = g[9], holdUntil = tonumber(g[10]),
  }
end

-- Wake a blocked worker at `at` ms (the delay marker keeps the earliest).
local function addGroupTimeMarker(prefix, at)
  rcall("ZADD", prefix .. "marker", "LT", at, "1")
end

-- Put a group in the rotation unless it is there; a base marker wakes a worker.
local function makeGroupReady(prefix, gid)
  local key = groupKey(prefix, gid)
  if rcall("HGET", key, "r") ~= "1" then
    rcall("HSET", key, "r", "1", "t", 0)
    rcall("RPUSH", prefix .. "groups:ready", gid)
  end
  if rcall("HEXISTS", prefix .. "meta", "paused") == 0 then
    rcall("ZADD", prefix .. "marker", 0, "0")
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
  if rcall("ZADD", groupKey(prefix, gid) .. ":wait", score, jobId) == 1 then
    rcall("HINCRBY", prefix .. "groups:meta", "waiting", 1)
    rcall("ZINCRBY", prefix .. "groups:index", 1, gid)
  end
  rcall("HSET", jobKey, "gid", gid)
  makeGroupReady(prefix, gid)
end

-- A grouped job left `active` (finished, retried, delayed, stalled): one
-- slot of its group is free again, so the group may take turns again.
local function groupJobLeft(prefix, jobId, gid)
  rcall("ZREM", prefix .. "groups:leases", jobId)
  local key = groupKey(prefix, gid)
  if rcall("HINCRBY", key, "a", -1) < 0 then
    rcall("HSET", key, "a", 0)
  end
  if rcall("ZCARD", key .. ":wait") > 0 then
    makeGroupReady(prefix, gid)
  end
end

-- Take a waiting grouped job out of its group (removed, promoted elsewhere).
local function unqueueGrouped(prefix, jobId, gid)
  if rcall("ZREM", groupKey(prefix, gid) .. ":wait", jobId) == 1 then
    rcall("HINCRBY", prefix .. "groups:meta", "waiting", -1)
    rcall("ZINCRBY", prefix .. "groups:index", -1, gid)
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

-- Due grouped delayed jobs to their groups, due timed groups back to the
-- rotation (bounded per call). Returns the earliest pending time or nil.
local function promoteGroups(prefix, now, eventsKey, maxEvents)
  local delayedKey = prefix .. "groups:delayed"
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
  local timedKey = prefix .. "groups:timed"
  local timed = rcall("ZRANGEBYSCORE", timedKey, "-inf", now, "LIMIT", 0,
    GROUP_STEP_LIMIT)
  for _, gid in ipairs(timed) do
    rcall("ZREM", timedKey, gid)
    makeGroupReady(prefix, gid)
  end
  local nextAt
  for _, key in ipairs({delayedKey, timedKey}) do
    local first = rcall("ZRANGE", key, 0, 0, "WITHSCORES")
    if #first > 0 then
      local at = tonumber(first[2])
      if not nextAt or at < nextAt then
        nextAt = at
      end
    end
  end
  return nextAt
end

-- Why the group cannot take a turn now: nil when it can, else a word and,
-- for a timed reason, the ms when it may again.
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
  if rcall("ZCARD", key .. ":wait") == 0 then
    return "empty"
  end
  return nil
end

-- Drop the head of the rotation (it is `gid`); a timed reason parks it in
-- `groups:timed` and sets the delay marker.
local function dropHeadGroup(prefix, gid, untilMs)
  rcall("LPOP", prefix .. "groups:ready")
  rcall("HSET", groupKey(prefix, gid), "r", "0", "t", 0)
  if untilMs then
    rcall("ZADD", prefix .. "groups:timed", untilMs, gid)
    addGroupTimeMarker(prefix, untilMs)
  end
end

-- Whether ungrouped jobs wait (in `wait` or `prioritized`).
local function ungroupedWaiting(q)
  return rcall("LLEN", q.wait) > 0 or rcall("ZCARD", q.prioritized) > 0
end

-- Keep the ungrouped jobs' place (`*`) in the rotation while they wait.
local function seatUngrouped(prefix, q)
  local metaKey = prefix .. "groups:meta"
  if rcall("HGET", metaKey, "u") ~= "1" and ungroupedWaiting(q) then
    rcall("HSET", metaKey, "u", "1")
    rcall("RPUSH", prefix .. "groups:ready", "*")
  end
end

--[[
  The next turn of the rotation. Returns jobId, gid for a grouped job moved
  to `active` (its group's counters taken), or "*" when it is the ungrouped
  jobs' turn (or nothing else can run), or nil when no group can run now.
]]
local function nextGroupedJob(q, prefix, now)
  local readyKey = prefix .. "groups:ready"
  for _ = 1, GROUP_STEP_LIMIT do
    local gid = rcall("LINDEX", readyKey, 0)
    if not gid then
      return "*"
    end
    if gid == "*" then
      if ungroupedWaiting(q) then
        rcall("LMOVE", readyKey, readyKey, "LEFT", "RIGHT")
        return "*"
      end
      rcall("LPOP", readyKey)
      rcall("HSET", prefix .. "groups:meta", "u", "0")
    else
      local s = groupState(prefix, gid)
      local blocked, untilMs = groupBlocked(prefix, gid, s, now)
      if blocked then
        dropHeadGroup(prefix, gid, untilMs)
      else
        local key = groupKey(prefix, gid)
        local popped = rcall("ZPOPMIN", key .. ":wait")
        local jobId = popped[1]
        rcall("HINCRBY", prefix .. "groups:meta", "waiting", -1)
        rcall("ZINCRBY", prefix .. "groups:index", -1, gid)
        rcall("HINCRBY", key, "a", 1)
        if s.max then
          if rcall("INCR", key .. ":limiter") == 1 then
            rcall("PEXPIRE", key .. ":limiter", s.duration or 1000)
          end
        end
        local turns = s.turns + 1
        s.active = s.active + 1
        if turns >= s.weight then
          -- The turn ends: to the back of the rotation, or out of it.
          local blockedNow, untilNow = groupBlocked(prefix, gid, s, now)
          if blockedNow then
            dropHeadGroup(prefix, gid, untilNow)
          else
            rcall("HSET", key, "t", 0)
            rcall("LMOVE", readyKey, readyKey, "LEFT", "RIGHT")
          end
        else
          rcall("HSET", key, "t", turns)
        end
        rcall("LPUSH", q.active, jobId)
        return jobId, gid
      end
    end
  end
  -- Every step dropped a group: let a worker come back for the rest.
  rcall("ZADD", q.marker, 0, "0")
  return nil
end
