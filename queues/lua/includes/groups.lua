--[[
  Groups (docs/groups.md, docs/protocol.md §6.2): every grouped waiting job
  owns one ticket in `groups:q`, a turn of its group scored by the turn's
  number (a group of weight w has w tickets per turn), out of every list a
  BullMQ worker reads. Workers pop tickets in order; a ticket takes its own
  job, or, for a slotted group (prioritized, lifo or parked jobs in
  `group:<gid>:wait`), the group's best. A ticket whose group cannot run
  (paused, held, at its concurrency, rate limited) is parked until what
  blocks the group ends. Running counts are kept only where a limit needs
  them. All keys derive from the queue prefix `P`.
  Requires: base, markers.
]]
local GROUP_SPAN = 0x100000000
--- How many tickets or promotions one call steps through at most.
local GROUP_STEP_LIMIT = 100
--- `groups:tail` keeps a group's last turn plus the tickets it used in it
--- over TURN_USED (weights go to 1,000).
local TURN_USED = 1024
--- Parked tickets a resume, a release or a lifted limit gives turns per call.
local UNPARK_CHUNK = 1000
--- Drained groups a claim forgets at most while the queue idles (no ticket
--- left): about half a millisecond of Redis.
local IDLE_SWEEP = 256
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

-- A field or member that is never a group id (`~` is not allowed in one),
-- longer than Redis's hash-/zset-max-listpack-value (64): in
-- `groups:active` it keeps the hash a hash table, in `groups:tail` (score
-- +inf, where no range of turns reaches) the zset a skiplist. As a
-- listpack, every field read or write walks the fields, and every tail
-- written walks the tails, parsing each score's text (`turn + used / 1024`
-- is no integer) and printing its own: at 100 groups that made a grouped
-- add cost 400,000 instructions in Redis, 280,000 with the pin.
local GROUP_PIN = string.rep("~", 65)

-- Keep the tail zset a skiplist (GROUP_PIN): before a write that may
-- create it.
local function pinTail(tailKey)
  rcall("ZADD", tailKey, "NX", "+inf", GROUP_PIN)
end

-- The groups with a tail (every one but the pin), the first `limit` (nil:
-- all) by their last turn.
local function groupsWithTails(prefix, limit)
  local range = {"ZRANGEBYSCORE", prefix .. "groups:tail", "-inf", "(+inf"}
  if limit then
    range[5], range[6], range[7] = "LIMIT", 0, limit
  end
  return rcall(unpack(range))
end

-- The texts of counts this call wrote (base.lua's intText, kept: a batch
-- writes one per group it meets, mostly the same few numbers).
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

local function limitOrNil(value)
  local n = tonumber(value)
  if n and n > 0 then
    return n
  end
  return nil
end

-- A group's limits from its own settings `g` (HMGET order: weight,
-- concurrency, max, duration, paused, hold, holdUntil; false: none) over
-- the defaults `d`, into `s`.
local function applyLimits(s, g, d)
  s.weight = limitOrNil(g[1] or d[1]) or 1
  s.concurrency = limitOrNil(g[2] or d[2])
  s.max, s.duration = limitOrNil(g[3] or d[3]), limitOrNil(g[4] or d[4])
  s.paused, s.hold, s.holdUntil = g[5] == "1", g[6], tonumber(g[7])
  s.counted = (s.concurrency or s.max) and true or false
  return s
end

--- A group without a hash of its own: every setting from the defaults.
local NO_SETTINGS = {false, false, false, false, false, false, false}

-- What a claim reads of `groups:meta` (turns.lua's nextGroupedJob, in this
-- order): the turn served and the last ticket taken, the ungrouped jobs'
-- turn, the sizes of `own`, `slotted` and `parked`, the swept turn, a
-- re-turn under way, the default limits (GROUP_LIMITS) and the layout mark.
-- A finish that claims in the same call reads it once for both.
local function claimMetaFields()
  local fields = {"v", "vm", "u", "own", "slotted", "parked", "sw", "rt",
    unpack(GROUP_LIMITS)}
  fields[#fields + 1] = "wl"
  return fields
end
local CLAIM_META = claimMetaFields()

-- From a CLAIM_META read: whether a limit applies to some group (defaults
-- that set a concurrency or a rate, or any group with settings of its
-- own), and whether any group has parked tickets.
local function limitsInForce(m)
  return (limitOrNil(m[10]) or limitOrNil(m[11]) or (tonumber(m[4]) or 0) > 0) and true
    or false, (tonumber(m[6]) or 0) > 0
end

-- Whether a grouped job waits: a ticket in `groups:q` or parked.
local function groupedWaiting(prefix)
  return rcall("EXISTS", prefix .. "groups:q") == 1 or
    (tonumber(rcall("HGET", prefix .. "groups:meta", "pk")) or 0) > 0
end

-- A ticket's name: the group, the job's FIFO key (16 digits: one turn's
-- tickets sort by group, then in the order their jobs came) and the job.
local function ticketName(gid, k, jobId)
  return gid .. ":" .. string.format("%016d", k) .. ":" .. jobId
end

-- The group, FIFO key and job id of a ticket's name.
local function ticketParts(member)
  local cut = string.find(member, ":", 1, true)
  return string.sub(member, 1, cut - 1), tonumber(string.sub(member, cut + 1, cut + 16)),
    string.sub(member, cut + 18)
end

-- Whether a job id is one BullMQ numbered (the queue's `id` counter).
local function numberedId(jobId)
  return #jobId <= 15 and string.find(jobId, "^[1-9]%d*$") ~= nil
end

-- A job's FIFO key as it is placed in its group: its id when BullMQ
-- numbered it and this is its first placement (`placed`: it has a `gid`
-- already), else a number drawn from the queue's id counter, kept in the
-- job's hash (`gsq`): no field more for the common job.
local function fifoKey(prefix, jobKey, jobId, placed)
  if numberedId(jobId) and not placed then
    return tonumber(jobId)
  end
  local k = rcall("INCR", prefix .. "id")
  rcall("HSET", jobKey, "gsq", k)
  return k
end

-- The name of the ticket a waiting job owns (`gsq`: its hash's field).
local function ticketOf(gid, jobId, gsq)
  local k = tonumber(gsq)
  if not k and numberedId(jobId) then
    k = tonumber(jobId)
  end
  return k and ticketName(gid, k, jobId) or nil
end

-- Keep a group in (or out of) the set `groups:<name>` and the set's size in
-- `groups:meta` field `<name>` (a claim asks the set only when it is not
-- empty).
local function markGroup(prefix, name, gid, on)
  local changed
  if on then
    changed = rcall("SADD", prefix .. "groups:" .. name, gid)
  else
    changed = rcall("SREM", prefix .. "groups:" .. name, gid)
  end
  if changed == 1 then
    rcall("HINCRBY", prefix .. "groups:meta", name, on and 1 or -1)
  end
end

-- The group's zset `key` of set `name` (slotted: its `:wait`, parked: its
-- `:parked`) may have emptied: then the group leaves the set. True when it
-- did.
local function unmarkIfGone(prefix, name, gid, key)
  if rcall("EXISTS", key) == 0 then
    markGroup(prefix, name, gid, false)
    return true
  end
  return false
end

-- The turn for the group's next ticket: the group's last turn while it has
-- a ticket left there (`w` per turn), else the next; never the turn served
-- (`v`) or one before it. A group with no ticket left (it arrives, or it
-- drained) joins the turn after the one served, behind every group that
-- has one there, as in any round-robin: so the turn served gets no new
-- tickets, ends, and the groups that drained in it fall below the next one
-- served, where claims forget them (sweepGroups). Kept in `groups:tail`
-- (turn + used / TURN_USED). Also returns whether the group had a tail.
local function takeTurn(prefix, gid, w, v)
  local tailKey = prefix .. "groups:tail"
  local t = tonumber(rcall("ZSCORE", tailKey, gid))
  local turn, used = v + 1, 0
  if t and math.floor(t) > v then
    turn = math.floor(t)
    used = math.floor((t - turn) * TURN_USED + 0.5)
  end
  if used >= w then
    turn, used = turn + 1, 0
  end
  used = used + 1
  if not t then  -- (a group that arrives: the tail may be new too)
    pinTail(tailKey)
  end
  rcall("ZADD", tailKey, turn + used / TURN_USED, gid)
  return turn, t ~= nil
end

-- The group's parked tickets get turns at `at` ms (`groups:timed`, and the
-- delay marker wakes a worker then).
local function wakeGroupAt(prefix, gid, at)
  rcall("ZADD", prefix .. "groups:timed", at, gid)
  addGroupTimeMarker(prefix, at)
end

-- The group's tickets in `groups:q` (its list's entries after (v, vm)):
-- how many, and the first of them in order, those at turn `v` and up to
-- `limit` more (-1: all).
local function queuedTickets(key, v, vm, limit)
  local n = rcall("ZCOUNT", key .. ":q", "(" .. v, "+inf")
  local first = {}
  for _, member in ipairs(rcall("ZRANGEBYSCORE", key .. ":q", v, v)) do
    if member > vm then
      n = n + 1
      first[#first + 1] = member
    end
  end
  if limit ~= 0 then
    for _, member in ipairs(rcall("ZRANGEBYSCORE", key .. ":q", "(" .. v, "+inf",
        "LIMIT", 0, limit)) do
      first[#first + 1] = member
    end
  end
  return n, first
end

-- A ticket in `groups:q` at `turn`, and in the group's list of its tickets
-- (`group:<gid>:q`: written here, never by the claim; its entries after
-- (v, vm) are the group's tickets in `groups:q`).
local function placeTicket(prefix, gid, member, turn)
  rcall("ZADD", prefix .. "groups:q", turn, member)
  rcall("ZADD", groupKey(prefix, gid) .. ":q", turn, member)
  -- Known groups, scored by the turn at which each drains.
  rcall("ZADD", prefix .. "groups:index", "GT", turn, gid)
end

-- Tickets of the group, in order, take turns from `turn` on, `w` per turn:
-- in `groups:q` (`onlyQueued`: only those already there), its list of
-- tickets, its tail and its index entry (`index`: score set, else raised).
local function giveTurns(prefix, gid, members, w, turn, onlyQueued)
  local pairs_, used = {}, 0
  for _, member in ipairs(members) do
    if used >= w then
      turn, used = turn + 1, 0
    end
    used = used + 1
    pairs_[#pairs_ + 1] = turn
    pairs_[#pairs_ + 1] = member
  end
  local key = groupKey(prefix, gid)
  for i = 1, #pairs_, 2000 do
    local part = {unpack(pairs_, i, math.min(i + 1999, #pairs_))}
    if onlyQueued then
      rcall("ZADD", prefix .. "groups:q", "XX", unpack(part))
    else
      rcall("ZADD", prefix .. "groups:q", unpack(part))
    end
    rcall("ZADD", key .. ":q", unpack(part))
  end
  local tailKey = prefix .. "groups:tail"
  pinTail(tailKey)
  if onlyQueued then  -- (all its queued tickets: its tail is where they end)
    rcall("ZADD", tailKey, turn + used / TURN_USED, gid)
  else
    rcall("ZADD", tailKey, "GT", turn + used / TURN_USED, gid)
  end
  rcall("ZADD", prefix .. "groups:index", "GT", turn, gid)
end

-- What placing tickets reads of `groups:meta`: the turn served (`v`), the
-- last ticket taken (`vm`), the default weight and how many groups have
-- settings of their own.
local function turnMeta(prefix)
  return rcall("HMGET", prefix .. "groups:meta", "v", "vm", "weight", "own", "seq",
    "slotted")
end

-- The weight of a group: its own, else the default, else 1 (`m`: turnMeta).
local function groupWeight(prefix, gid, m)
  local w
  if (tonumber(m[4]) or 0) > 0 then
    w = limitOrNil(rcall("HGET", groupKey(prefix, gid), "weight"))
  end
  return w or limitOrNil(m[3]) or 1
end

-- A stored job waits in its group: a ticket for it, and, when the group is
-- slotted or the job is not plain (a priority, lifo, `front`: before every
-- job of its priority, as a stalled job goes back to the head of `wait`),
-- the job in the group's zset (priority, then seq; lifo newest first).
-- `fresh`: the job was stored by this call with `gid` in its hash, never
-- placed before.
local function enqueueGrouped(prefix, jobKey, jobId, gid, priority, lifo, front, fresh)
  local m = turnMeta(prefix)
  if not m[5] then
    -- (groups are in use, in this layout: migrateWaiting)
    rcall("HSET", prefix .. "groups:meta", "seq", 0, "wl", 1)
  end
  local placed = not fresh and rcall("HGET", jobKey, "gid")
  local seq = fifoKey(prefix, jobKey, jobId, placed)
  local member = ticketName(gid, seq, jobId)
  local key = groupKey(prefix, gid)
  if priority > 0 or lifo or front or ((tonumber(m[6]) or 0) > 0 and
     rcall("SISMEMBER", prefix .. "groups:slotted", gid) == 1) then
    local score
    if front then
      score = priority * GROUP_SPAN - GROUP_SPAN / 2
    elseif lifo and priority == 0 then
      score = -seq
    else
      score = priority * GROUP_SPAN + seq % GROUP_SPAN
    end
    rcall("ZADD", key .. ":wait", score, jobId)
    markGroup(prefix, "slotted", gid, true)
  end
  local w = groupWeight(prefix, gid, m)
  local v = tonumber(m[1]) or 0
  local turn, known = takeTurn(prefix, gid, w, v)
  if known then
    -- The group's list keeps its tickets from the turn served on: those
    -- before it were all taken (else a group that always has a backlog
    -- would keep one entry for every job it ever had). A group without a
    -- tail has no list: the sweep took both.
    rcall("ZREMRANGEBYSCORE", key .. ":q", "-inf", "(" .. v)
  end
  placeTicket(prefix, gid, member, turn)
  if not fresh then
    rcall("HSET", jobKey, "gid", gid)
  end
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
  markGroup(prefix, "own", gid, hasOwnSettings(groupKey(prefix, gid)))
end

-- Running jobs per group among `active`'s ids up to index `last` (-1: all).
local function runningByGroup(prefix, last)
  local counts = {}
  for _, id in ipairs(rcall("LRANGE", prefix .. "active", 0, last)) do
    -- pcall: the key may be another client's of another type.
    local g = redis.pcall("HGET", prefix .. id, "gid")
    if type(g) == "string" and g ~= "" then
      counts[g] = (counts[g] or 0) + 1
    end
  end
  return counts
end

-- Count the running jobs of `gid` (every group when nil) from `active`, as
-- a limit that starts to apply needs them: jobs claimed before it count.
local function recountRunning(prefix, gid)
  local counts = runningByGroup(prefix, -1)
  if gid then
    counts = {[gid] = counts[gid]}
  end
  local activeKey = prefix .. "groups:active"
  if gid then
    rcall("HDEL", activeKey, gid)
  else
    rcall("DEL", activeKey)
  end
  local writes = {GROUP_PIN, 0}
  for g, n in pairs(counts) do
    writes[#writes + 1] = g
    writes[#writes + 1] = n
  end
  rcall("HSET", activeKey, unpack(writes))
end

-- Park a ticket whose group cannot run: its job waits in the group's zset
-- (FIFO by seq: a parked plain job keeps its place), the ticket in
-- `group:<gid>:parked` by seq until what blocks the group ends.
local function parkTicket(prefix, gid, member, seq, jobId)
  local key = groupKey(prefix, gid)
  local score = seq % GROUP_SPAN
  rcall("ZADD", key .. ":wait", "NX", score, jobId)
  markGroup(prefix, "slotted", gid, true)
  rcall("ZADD", key .. ":parked", score, member)
  rcall("ZREM", key .. ":q", member)
  markGroup(prefix, "parked", gid, true)
  rcall("HINCRBY", prefix .. "groups:meta", "pk", 1)
end

-- Why the group `s` (its limits, running count, key) cannot take a turn
-- now: nil when it can, else a word and, for a timed reason, the ms when
-- it may again. A hold whose time has come is released here.
local function groupBlocked(prefix, gid, s, now)
  local key = s.key
  if s.paused then
    return "paused"
  end
  if s.hold then
    if not s.holdUntil or s.holdUntil > now then
      return "held", s.holdUntil
    end
    rcall("HDEL", key, "hold", "holdUntil", "holdInfo")
    rcall("SREM", prefix .. "groups:held", gid)
    syncOwnSettings(prefix, gid)
    s.hold = nil
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

-- The state of one group as the claim reads it: limits, running, key, and
-- the turn served (`v`).
local function readGroupState(prefix, gid)
  local key = groupKey(prefix, gid)
  local d = rcall("HMGET", prefix .. "groups:meta", "v", unpack(GROUP_LIMITS))
  local s = applyLimits({key = key}, rcall("HMGET", key, unpack(GROUP_STATE)),
    {d[2], d[3], d[4], d[5]})
  s.active = tonumber(rcall("HGET", prefix .. "groups:active", gid)) or 0
  s.v = tonumber(d[1]) or 0
  return s
end

-- Give parked tickets of the group turns again, as many as it may run now
-- (none while it is blocked; its free slots under a cap, what is left of
-- its rate window, else UNPARK_CHUNK a call, the next claims the rest),
-- from the turn after the one served, its weight per turn.
local function unparkGroup(prefix, gid, now)
  local key = groupKey(prefix, gid)
  local parkedKey = key .. ":parked"
  local s = readGroupState(prefix, gid)
  local blocked, untilMs = groupBlocked(prefix, gid, s, now)
  if blocked then
    if untilMs then  -- (a clock a little ahead of Redis's came early)
      wakeGroupAt(prefix, gid, untilMs)
    end
    return
  end
  local n = UNPARK_CHUNK
  if s.concurrency then
    n = math.min(n, s.concurrency - s.active)
  end
  if s.max then
    n = math.min(n, s.max - (tonumber(rcall("GET", key .. ":limiter")) or 0))
  end
  local items = {}
  if n > 0 then
    items = rcall("ZPOPMIN", parkedKey, n)
  end
  if #items > 0 then
    local members = {}
    for i = 1, #items, 2 do
      members[#members + 1] = items[i]
    end
    rcall("HINCRBY", prefix .. "groups:meta", "pk", -#members)
    giveTurns(prefix, gid, members, s.weight, s.v + 1, false)
    wakeWorker(prefix)
  end
  if not unmarkIfGone(prefix, "parked", gid, parkedKey) and n == UNPARK_CHUNK then
    wakeGroupAt(prefix, gid, 0)  -- more than a call's worth: the next claim goes on
  end
end

-- Grouped jobs left `active`: `done` = {total, order, count} (a batch's
-- tally). The summary's running count goes down; where a limit applies,
-- the groups' running counts too (one HMGET and one HSET for all), and a
-- group with parked tickets gets turns for the slots it freed.
-- `carry` (a finish that claims next in the same call): the running count's
-- change is left in `carry.running` for the claim to write with its own,
-- and the tally's read of `groups:meta` (groupJobLeft, at the batch's first
-- grouped job) in `carry.meta` for the claim to use, unless this wrote to it
-- (unparked a group). Nothing else a finish does writes `groups:meta`: a
-- flow parent or a deduplicated next job it releases goes to `wait`, and
-- the claim adopts it.
local function settleGroupJobs(prefix, done, now, carry)
  if done.total == 0 then
    return
  end
  if carry then
    carry.running = carry.running - done.total
    carry.meta = done.meta
  else
    rcall("HINCRBY", prefix .. "groups:meta", "running", -done.total)
  end
  if not done.limits then  -- (running counts are kept only where a limit applies)
    return
  end
  local parked = done.parked
  local order = done.order
  local activeKey = prefix .. "groups:active"
  local stored = rcall("HMGET", activeKey, unpack(order))
  local writes, gone = {GROUP_PIN, 0}, {}
  for i = 1, #order do
    local n = tonumber(stored[i])
    if n then  -- counted: a limit applied when the job was claimed
      n = n - done.count[order[i]]
      if n > 0 then
        writes[#writes + 1] = order[i]
        writes[#writes + 1] = countText(n)
      else
        gone[#gone + 1] = order[i]
      end
    end
  end
  if #writes > 2 then
    rcall("HSET", activeKey, unpack(writes))
  end
  if #gone > 0 then
    rcall("HDEL", activeKey, unpack(gone))
  end
  if parked then
    if carry then
      carry.meta = nil  -- (an unparked group changes it)
    end
    local isParked = rcall("SMISMEMBER", prefix .. "groups:parked", unpack(order))
    for i = 1, #order do
      if isParked[i] == 1 then
        unparkGroup(prefix, order[i], now)
      end
    end
  end
end

-- A grouped job left `active`. `done`: a batch's tally that the caller
-- settles with settleGroupJobs (its first grouped job reads `groups:meta`:
-- whether limits apply, then its jobs are counted per group); without it,
-- now. (Its lease is its worker's: it stays.)
local function groupJobLeft(prefix, gid, done, now)
  local settleNow = not done
  if settleNow then
    done = {total = 0, order = {}, count = {}}
  end
  if done.meta == nil then
    done.meta = rcall("HMGET", prefix .. "groups:meta", unpack(CLAIM_META))
    done.limits, done.parked = limitsInForce(done.meta)
  end
  done.total = done.total + 1
  if done.limits then  -- (per group only where a limit may count it)
    local n = done.count[gid]
    if not n then
      done.order[#done.order + 1] = gid
      n = 0
    end
    done.count[gid] = n + 1
  end
  if settleNow then
    settleGroupJobs(prefix, done, now or serverTimeMs())
  end
end

-- Take a waiting grouped job out of its group (removed, promoted elsewhere,
-- reprioritized): with its ticket, in `groups:q` or parked. True when it
-- was waiting.
local function unqueueGrouped(prefix, jobId, gid)
  local jobKey = prefix .. jobId
  local member = ticketOf(gid, jobId, rcall("HGET", jobKey, "gsq"))
  if not member then
    return false
  end
  local key = groupKey(prefix, gid)
  if rcall("ZREM", prefix .. "groups:q", member) == 0 then
    if rcall("ZREM", key .. ":parked", member) == 0 then
      return false
    end
    rcall("HINCRBY", prefix .. "groups:meta", "pk", -1)
    unmarkIfGone(prefix, "parked", gid, key .. ":parked")
  end
  rcall("ZREM", key .. ":q", member)
  if rcall("ZREM", key .. ":wait", jobId) == 1 then
    unmarkIfGone(prefix, "slotted", gid, key .. ":wait")
  end
  return true
end

-- The layout before tickets (until 2026-12-06: each group's waiting jobs in
-- its zset, the rotation in `groups:ready`, flags in `groups:active`): its
-- waiting jobs get tickets, staying in their groups' zsets as slotted jobs
-- (their order kept), the running counts are counted again from `active`
-- and the old keys go. Once, at the first claim after an upgrade: O(the
-- grouped backlog).
local function migrateRotation(prefix)
  local readyKey = prefix .. "groups:ready"
  if rcall("EXISTS", readyKey, prefix .. "groups:seated", prefix .. "groups:turns") == 0 then
    return false
  end
  local m = turnMeta(prefix)
  local v = tonumber(m[1]) or 0
  for _, gid in ipairs(rcall("ZRANGE", prefix .. "groups:index", 0, -1)) do
    rcall("ZADD", prefix .. "groups:index", 0, gid)  -- (it counted jobs: turns now)
    local jobs = rcall("ZRANGE", groupKey(prefix, gid) .. ":wait", 0, -1)
    if #jobs > 0 then
      markGroup(prefix, "slotted", gid, true)
      local w = groupWeight(prefix, gid, m)
      for _, jobId in ipairs(jobs) do
        local member = ticketName(gid, fifoKey(prefix, prefix .. jobId, jobId, true), jobId)
        placeTicket(prefix, gid, member, (takeTurn(prefix, gid, w, v)))
      end
    end
  end
  rcall("DEL", readyKey, prefix .. "groups:seated", prefix .. "groups:turns")
  rcall("HDEL", prefix .. "groups:meta", "u")
  recountRunning(prefix, nil)
  return true
end

-- The parked tickets counted again from the groups' zsets into
-- `groups:meta` field `pk` (which parking and unparking keep): O(groups
-- with parked tickets).
local function recountParked(prefix)
  local n = 0
  for _, gid in ipairs(rcall("SMEMBERS", prefix .. "groups:parked")) do
    n = n + rcall("ZCARD", groupKey(prefix, gid) .. ":parked")
  end
  rcall("HSET", prefix .. "groups:meta", "pk", n)
end

-- The layout before 2026-12-07 also listed every grouped waiting job in
-- `groups:waiting` (for counts and lists, now read from the tickets:
-- `groups:q` and the parked count): that key goes and the count starts.
-- Once, at the first claim after an upgrade (`groups:meta` field `wl`
-- missing): O(groups with parked tickets), and the old key is unlinked.
local function migrateWaiting(prefix)
  rcall("UNLINK", prefix .. "groups:waiting")
  recountParked(prefix)
  rcall("HSET", prefix .. "groups:meta", "wl", 1)
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

-- Due grouped delayed jobs to their groups, due timed groups' parked
-- tickets back to turns (bounded per call). One EXISTS when neither zset
-- has anything, else one peek per zset when nothing is due. Returns the
-- earliest pending time or nil, and true when it moved anything.
local function promoteGroups(prefix, now, eventsKey, metaKey)
  local delayedKey = prefix .. "groups:delayed"
  local timedKey = prefix .. "groups:timed"
  if rcall("EXISTS", delayedKey, timedKey) == 0 then
    return nil  -- (one call where two peeks would find nothing)
  end
  local promoted = false
  local _, at = firstDue(delayedKey)
  if at and at <= now then
    promoted = true
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
  local _, timedAt = firstDue(timedKey)
  if timedAt and timedAt <= now then
    promoted = true
    local timed = rcall("ZRANGEBYSCORE", timedKey, "-inf", now, "LIMIT", 0,
      GROUP_STEP_LIMIT)
    rcall("ZREM", timedKey, unpack(timed))
    for _, gid in ipairs(timed) do
      unparkGroup(prefix, gid, now)
    end
    _, timedAt = firstDue(timedKey)
  end
  if timedAt and (not at or timedAt < at) then
    return timedAt, promoted
  end
  return at, promoted
end
