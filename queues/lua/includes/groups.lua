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
--- Jobs ready in one ms that `groups:waiting` keeps in order (a double
--- holds 11 bits below the ms of a date in ms until 2109).
local READY_TIES = 2048
--- How many rotation steps or promotions one call takes at most.
local GROUP_STEP_LIMIT = 100
--- The limits a group may set in its hash and `groups:meta` holds as the
--- defaults, in the order every reader takes them.
local GROUP_LIMITS = {"weight", "concurrency", "max", "duration"}

-- GROUP_LIMITS then `...`: the fields one HMGET reads.
local function limitsAnd(...)
  local fields = {unpack(GROUP_LIMITS)}
  for _, field in ipairs({...}) do
    fields[#fields + 1] = field
  end
  return fields
end
--- What a group may have of its own (limits, pause, hold) ...
local GROUP_OWN = limitsAnd("paused", "hold")
--- ... and what a claim reads of it (applyLimits' order).
local GROUP_STATE = limitsAnd("paused", "hold", "holdUntil")

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

-- Wake a blocked worker at `at` ms (the delay marker keeps the earliest).
local function addGroupTimeMarker(prefix, at)
  rcall("ZADD", prefix .. "marker", "LT", at, "1")
end

-- Wake a blocked worker unless the queue is paused.
local function wakeWorker(prefix)
  addBaseMarkerIfNeeded(prefix .. "marker",
    rcall("HEXISTS", prefix .. "meta", "paused") == 1)
end

-- A group's running jobs (`groups:active`) carry a flag, so that a finish
-- learns from the count it reads what the group needs: less GROUP_FLAG while
-- the group is parked at its concurrency cap (the finish puts it back in the
-- rotation), plus GROUP_FLAG once it is idle-bound (out of the rotation with
-- nothing waiting and nothing of its own: the finish of its last running
-- job forgets it). Whatever seats the group or gives it something of its
-- own takes the idle-bound flag off first (keepGroup), so the flag alone
-- says the group may be forgotten.
local GROUP_FLAG = 1099511627776  -- 2^40
--- Stored counts from here up (and from minus this down) carry a flag.
local GROUP_FLAGGED = GROUP_FLAG / 2

-- A field of `groups:active` that is never a group id (`~` is not allowed
-- in one), longer than Redis's hash-max-listpack-value (64): it keeps the
-- hash a hash table. As a listpack, every field read or write walks the
-- fields, and a batch reads and writes one per group it meets.
local GROUP_ACTIVE_PIN = string.rep("~", 65)

-- The texts of counts this call wrote to `groups:active` (base.lua's
-- intText, kept: a batch writes one per group it meets, mostly the same few
-- numbers). (Made on a call's first count: most calls write none.)
local countTexts = false
local function countText(n)
  if not countTexts then
    countTexts = {}
  end
  local text = countTexts[n]
  if not text then
    text = intText(n)
    countTexts[n] = text
  end
  return text
end

-- The running count and flag (-1 parked, 1 idle-bound, 0 none) of a stored value.
local function splitActive(stored)
  local v = tonumber(stored) or 0
  local flag = 0
  if v <= -GROUP_FLAGGED then
    v, flag = v + GROUP_FLAG, -1
  elseif v >= GROUP_FLAGGED then
    v, flag = v - GROUP_FLAG, 1
  end
  return math.max(v, 0), flag
end

-- The group is no longer idle-bound: its idle-bound flag comes off.
local function keepGroup(prefix, gid)
  local activeKey = prefix .. "groups:active"
  local v = tonumber(rcall("HGET", activeKey, gid))
  if v and v >= GROUP_FLAGGED then
    rcall("HSET", activeKey, gid, countText(v - GROUP_FLAG))
  end
end

-- Put a group at the back of the rotation unless it is in it
-- (`groups:seated`); true when it was not.
local function seatGroup(prefix, gid)
  if rcall("SADD", prefix .. "groups:seated", gid) == 0 then
    return false
  end
  keepGroup(prefix, gid)
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
  local score, seq
  if front then
    score = priority * GROUP_SPAN - GROUP_SPAN / 2
  else
    seq = rcall("HINCRBY", prefix .. "groups:meta", "seq", 1)
    if lifo and priority == 0 then
      score = -seq
    else
      score = priority * GROUP_SPAN + seq % GROUP_SPAN
    end
  end
  local key = groupKey(prefix, gid)
  if rcall("ZADD", key .. ":wait", score, jobId) == 1 then
    -- Every grouped waiting job, by when it became ready (lists, oldest);
    -- jobs ready in the same ms in the order they came (a fraction of a ms
    -- from `seq`: as text, equal scores would list job 10 before job 2).
    local t = rcall("HMGET", jobKey, "timestamp", "delay")
    local ready = (tonumber(t[1]) or 0) + (tonumber(t[2]) or 0)
    if seq then
      ready = ready + (seq % READY_TIES) / READY_TIES
    end
    rcall("ZADD", prefix .. "groups:waiting", ready, jobId)
    rcall("ZADD", prefix .. "groups:index", rcall("ZCARD", key .. ":wait"), gid)
  end
  rcall("HSET", jobKey, "gid", gid)
  seatGroup(prefix, gid)
  wakeWorker(prefix)  -- every add wakes a worker, as BullMQ's adds do
end

-- Whether the group has anything of its own set (then it has a hash, is in
-- `groups:own` and is never forgotten).
local function hasOwnSettings(key)
  for _, value in ipairs(rcall("HMGET", key, unpack(GROUP_OWN))) do
    if value then
      return true
    end
  end
  return false
end

-- Keep `groups:own` true to the group's hash, and its size in `groups:meta`
-- field `own` (a claim asks about groups of their own only when there are).
local function syncOwnSettings(prefix, gid)
  local changed
  if hasOwnSettings(groupKey(prefix, gid)) then
    changed = rcall("SADD", prefix .. "groups:own", gid)
    if changed == 1 then
      keepGroup(prefix, gid)
    end
  else
    changed = -rcall("SREM", prefix .. "groups:own", gid)
  end
  if changed ~= 0 then
    rcall("HSET", prefix .. "groups:meta", "own", rcall("SCARD", prefix .. "groups:own"))
  end
end

-- Forget groups that nothing waits in or runs in and that have nothing of
-- their own (their index entry, counters and turn; a new job makes them
-- again), so that the groups of passing customers do not pile up. Their rate
-- window keys expire by themselves. `checked`: the caller knows each is out
-- of the rotation, empty and has nothing of its own; else those are read.
local function forgetGroups(prefix, gids, checked)
  if #gids == 0 then
    return
  end
  if not checked then
    local seated = rcall("SMISMEMBER", prefix .. "groups:seated", unpack(gids))
    local own = rcall("SMISMEMBER", prefix .. "groups:own", unpack(gids))
    local waiting = rcall("ZMSCORE", prefix .. "groups:index", unpack(gids))
    local idle = {}
    for i, gid in ipairs(gids) do
      if seated[i] == 0 and own[i] == 0 and (tonumber(waiting[i]) or 0) == 0 then
        idle[#idle + 1] = gid
      else
        rcall("HSET", prefix .. "groups:active", gid, 0)  -- not idle: no flag
      end
    end
    gids = idle
    if #gids == 0 then
      return
    end
  end
  rcall("ZREM", prefix .. "groups:index", unpack(gids))
  rcall("HDEL", prefix .. "groups:active", unpack(gids))
  -- Turns are kept only while weights are in use: mostly there is no hash.
  local turnsKey = prefix .. "groups:turns"
  if rcall("EXISTS", turnsKey) == 1 then
    rcall("HDEL", turnsKey, unpack(gids))
  end
end

-- Grouped jobs of `gid` left `active` and its stored count is `v` after
-- them: the flag says the rest. A group parked at its cap goes back in the
-- rotation if jobs wait, else with nothing running it may be forgotten
-- (into `freed.maybe`: forgetGroups looks and writes); an idle-bound one is
-- forgotten (into `freed.idle`) when its last running job left. Returns
-- what `groups:active` must hold for it, as text (the count without the
-- flag once it is no longer parked), or nil for a group in `freed`, which
-- forgetFreed writes.
local function groupSlotsFreed(prefix, gid, v, freed)
  local active, flag = splitActive(v)
  if flag == 1 then
    if active == 0 then
      freed.idle[#freed.idle + 1] = gid
      return nil
    end
    return countText(v)
  elseif flag == -1 then
    if rcall("ZCARD", groupKey(prefix, gid) .. ":wait") > 0 then
      makeGroupReady(prefix, gid)
    elseif active == 0 then
      freed.maybe[#freed.maybe + 1] = gid
      return nil
    end
  end
  return countText(active)
end

-- Forget the groups that slots freed left idle: the idle-bound ones as they
-- are (their flag says so), the others once checked.
local function forgetFreed(prefix, freed)
  forgetGroups(prefix, freed.idle, true)
  forgetGroups(prefix, freed.maybe, false)
end

-- A grouped job left `active`. `done`: a batch's tally ({total, order,
-- count}) that the caller settles with settleGroupJobs; without it, now:
-- one HINCRBY frees its slot. (Its lease is its worker's: it stays.)
local function groupJobLeft(prefix, gid, done)
  if not done then
    rcall("HINCRBY", prefix .. "groups:meta", "running", -1)
    local freed = {idle = {}, maybe = {}}
    local activeKey = prefix .. "groups:active"
    local v = rcall("HINCRBY", activeKey, gid, -1)
    local stored = groupSlotsFreed(prefix, gid, v, freed)
    if stored and stored ~= countText(v) then
      rcall("HSET", activeKey, gid, stored)
    end
    forgetFreed(prefix, freed)
    return
  end
  done.total = done.total + 1
  local n = done.count[gid]
  if not n then
    done.order[#done.order + 1] = gid
    n = 0
  end
  done.count[gid] = n + 1
end

-- A batch's grouped jobs that left: the slots of all their groups are
-- freed with one read and one write of `groups:active` (a script runs
-- alone, so nothing comes between), and the groups it leaves idle are
-- forgotten together.
local function settleGroupJobs(prefix, done)
  local order = done.order
  if #order == 0 then
    return
  end
  rcall("HINCRBY", prefix .. "groups:meta", "running", -done.total)
  local activeKey = prefix .. "groups:active"
  local stored = rcall("HMGET", activeKey, unpack(order))
  local writes, freed = {GROUP_ACTIVE_PIN, 0}, {idle = {}, maybe = {}}
  for i = 1, #order do
    local gid = order[i]
    local v = (tonumber(stored[i]) or 0) - done.count[gid]
    local text
    if v >= 0 and v < GROUP_FLAGGED then
      text = countText(v)  -- no flag: the count is all there is to write
    else
      text = groupSlotsFreed(prefix, gid, v, freed)
    end
    if text then
      writes[#writes + 1] = gid
      writes[#writes + 1] = text
    end
  end
  if #writes > 2 then
    rcall("HSET", activeKey, unpack(writes))
  end
  forgetFreed(prefix, freed)
end

-- Take a waiting grouped job out of its group (removed, promoted elsewhere).
local function unqueueGrouped(prefix, jobId, gid)
  local key = groupKey(prefix, gid)
  if rcall("ZREM", key .. ":wait", jobId) == 1 then
    rcall("ZREM", prefix .. "groups:waiting", jobId)
    rcall("ZADD", prefix .. "groups:index", "XX", rcall("ZCARD", key .. ":wait"), gid)
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
