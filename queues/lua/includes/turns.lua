--[[
  The claim's side of groups (docs/groups.md): the rotation's turns, each
  group's limits, and what one claim call writes back when it ends. A claim
  call reads the rotation ahead in one LRANGE and turns it in Lua, reads the
  state of the groups ahead together (a few calls for all of them), and
  writes the rotation, the groups it met and the index once
  (flushGroupClaims), so that a turn costs a grouped job about what a BullMQ
  pop costs an ungrouped one.
  Requires: base, markers, groups.
]]
--- How many entries of the rotation a claim reads at a time beyond its count.
local RING_AHEAD = 8

local function limitOrNil(value)
  local n = tonumber(value)
  if n and n > 0 then
    return n
  end
  return nil
end

-- The defaults of every group (`groups:meta`), as loadStates takes them,
-- and how many groups have anything of their own (`own`).
local function groupDefaults(prefix)
  return rcall("HMGET", prefix .. "groups:meta", unpack(limitsAnd("own")))
end

-- A group's limits from its own settings `g` (HMGET order: weight,
-- concurrency, max, duration, paused, hold, holdUntil; false: none) over
-- the defaults `d`, into `s`.
local function applyLimits(s, g, d)
  s.weight = limitOrNil(g[1] or d[1]) or 1
  s.concurrency = limitOrNil(g[2] or d[2])
  s.max, s.duration = limitOrNil(g[3] or d[3]), limitOrNil(g[4] or d[4])
  s.paused, s.hold, s.holdUntil = g[5] == "1", g[6], tonumber(g[7])
  return s
end

--- A group without a hash of its own: every setting from the defaults.
local NO_SETTINGS = {false, false, false, false, false, false, false}

-- What every group without anything of its own shares for the call: the
-- defaults' limits, as the metatable of its state (one table of limits
-- for all of them, not one per group).
local function plainLimits(d)
  return {__index = applyLimits({own = false}, NO_SETTINGS, d)}
end

-- Read the state of the rotation's next entries (`items[from..]`, as many as
-- the call may still take jobs) that this call has not met yet, a few calls
-- for all of them: running (`groups:active`), whether it has anything of its
-- own (asked only when some group has; then its hash) and turns taken (read
-- only when a weight may be above 1). Each becomes `st.groups[gid]`
-- (`waiting` is counted as the call takes jobs).
local function loadStates(prefix, st, items, from)
  local gids = {}
  for i = from, math.min(#items, from + math.max(st.want - #st.taken, 1) - 1) do
    local gid = items[i]
    if gid ~= "*" and st.groups[gid] == nil then
      st.groups[gid] = false
      gids[#gids + 1] = gid
    end
  end
  if #gids == 0 then
    return
  end
  local d = st.defaults
  local active = rcall("HMGET", prefix .. "groups:active", unpack(gids))
  local own, turns = {}, {}
  if (tonumber(d[5]) or 0) > 0 then
    own = rcall("SMISMEMBER", prefix .. "groups:own", unpack(gids))
  end
  if (tonumber(d[5]) or 0) > 0 or (tonumber(d[1]) or 1) > 1 then
    turns = rcall("HMGET", prefix .. "groups:turns", unpack(gids))
  end
  local groupPrefix = prefix .. "group:"
  -- (Numeric loops: an ipairs step is a function call.)
  for i = 1, #gids do
    local gid = gids[i]
    local running, flag, stored = 0, 0, active[i]
    if stored and stored ~= "0" then
      running, flag = splitActive(stored)
    end
    local t = 0
    if turns[i] then
      t = tonumber(turns[i]) or 0
    end
    -- Every field a claim sets is made here (a field added later may grow
    -- the table: a rehash each). `key` only where something may hold the
    -- group back (settings of its own, a default limit): a group without
    -- one gets no checks.
    local s = {waitKey = groupPrefix .. gid .. ":wait", active = running, flag = flag,
      turns = t, turnsRead = t, dirty = false, waiting = false, gone = false,
      popped = false, nextPop = 0, key = false}
    if own[i] == 1 then
      s.key, s.own = groupPrefix .. gid, true
      applyLimits(s, rcall("HMGET", s.key, unpack(GROUP_STATE)), d)
    else
      if st.limited then
        s.key = groupPrefix .. gid
      end
      setmetatable(s, st.plain)
    end
    st.groups[gid] = s
    st.order[#st.order + 1] = gid
  end
end

--[[
  The rotation `groups:ready` as one claim call turns it: `items` read from
  the list's head (`loaded` of them; `whole` once the list's end was read),
  `head` the next turn, `kept` the entries that go to the back. When the
  list's end comes round, what was kept takes turns again in Lua and the
  list is written whole at the end (`rewrite`).
]]
local function ringOpen(key, want)
  local items = rcall("LRANGE", key, 0, want - 1)
  return {key = key, items = items, loaded = #items, whole = #items < want,
    head = 1, kept = {}, rewrite = false}
end

-- The entry whose turn it is, or nil when the rotation is empty.
local function ringPeek(ring)
  if ring.head > #ring.items and not ring.whole then
    local more = rcall("LRANGE", ring.key, ring.loaded, ring.loaded + RING_AHEAD * 8 - 1)
    for _, entry in ipairs(more) do
      ring.items[#ring.items + 1] = entry
    end
    ring.loaded = ring.loaded + #more
    ring.whole = #more < RING_AHEAD * 8
  end
  if ring.head > #ring.items then
    if #ring.kept == 0 then
      return nil
    end
    ring.items, ring.kept, ring.head, ring.rewrite = ring.kept, {}, 1, true
  end
  return ring.items[ring.head]
end

-- The head's turn ends: to the back when `keep`, else out of the rotation.
local function ringAdvance(ring, keep)
  if keep then
    ring.kept[#ring.kept + 1] = ring.items[ring.head]
  end
  ring.head = ring.head + 1
end

-- Write the turned rotation back: the consumed head trimmed and the kept
-- entries pushed, or, once it came round in Lua, the whole list (one move
-- when one turn was taken).
local function ringFlush(ring)
  if not ring.rewrite and ring.head == 2 and #ring.kept <= 1 then
    if #ring.kept == 0 then
      rcall("LPOP", ring.key)
    else
      rcall("LMOVE", ring.key, ring.key, "LEFT", "RIGHT")
    end
    return
  end
  local rest = {}
  if ring.rewrite then
    for i = ring.head, #ring.items do
      rest[#rest + 1] = ring.items[i]
    end
    rcall("DEL", ring.key)
  elseif ring.head > 1 then
    rcall("LTRIM", ring.key, ring.head - 1, -1)
  end
  local kept = ring.kept
  for i = 1, #kept do
    rest[#rest + 1] = kept[i]
  end
  for i = 1, #rest, 1000 do
    rcall("RPUSH", ring.key, unpack(rest, i, math.min(i + 999, #rest)))
  end
end

-- How many of the group's jobs its turn takes in a row if the call goes
-- on, when more than one may be (its weight's turns left, or it alone in
-- the rotation): as many as the call still wants and the group's
-- concurrency allows. A rate-limited group takes one at a time.
local function runLength(st, ring, s)
  if s.max then
    return 1
  end
  local n = st.want - #st.taken
  if not (ring.whole and ring.head == #ring.items and #ring.kept == 0) then
    local left = s.weight - s.turns
    if left < n then
      n = left
    end
  end
  local room = s.concurrency and s.concurrency - s.active
  if room and room < n then
    n = room
  end
  if n < 1 then
    return 1
  end
  return n
end

-- A run's jobs (popped together, taken one per turn) that the call did not
-- take go back to their group's zset with the scores they had: their place
-- is what it was.
local function returnPopped(s)
  local popped, back = s.popped, {}
  for i = s.nextPop, #popped, 2 do
    back[#back + 1] = popped[i + 1]
    back[#back + 1] = popped[i]
  end
  rcall("ZADD", s.waitKey, unpack(back))
  s.popped = false
end

-- Why the group cannot take a turn now (empty aside: the pop tells): nil
-- when it can, else a word and, for a timed reason, the ms when it may again.
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

-- A group out of the rotation now (its ring entry already dropped): `reason`
-- nil when it is empty, "concurrency" parks it (the finish that frees a slot
-- brings it back), a timed one (`untilMs`) waits in `groups:timed`. An empty
-- group with nothing running or of its own is forgotten; with jobs running it
-- is idle-bound (the last of them forgets it). Written by flushGroupClaims.
local function dropGroup(prefix, gid, s, reason, untilMs, st)
  s.gone, s.dirty, s.turns = true, true, 0
  st.dropped[#st.dropped + 1] = gid
  if reason == "concurrency" then
    s.flag = -1
  elseif not reason and not s.own then
    if s.active == 0 then
      s.dirty = false
      st.forgets[#st.forgets + 1] = gid
      return
    end
    s.flag = 1
  else
    s.flag = 0
  end
  if untilMs then
    rcall("ZADD", prefix .. "groups:timed", untilMs, gid)
    addGroupTimeMarker(prefix, untilMs)
  end
end

-- End of a claim call (or before anything else writes groups in it): the
-- groups it met written together (running, waiting in the index, turns, out
-- of `groups:seated`, forgotten), the rotation, and the grouped jobs it took
-- on `active` and out of `groups:waiting`, one call each, counted as running
-- and under the lease of the worker that took them (its token).
local function flushGroupClaims(prefix, st)
  if st.order then
    local active, index, turns, turnsDone = {GROUP_ACTIVE_PIN, 0}, {}, {}, {}
    local order = st.order
    for i = 1, #order do
      local gid = order[i]
      local s = st.groups[gid]
      if s and s.popped and s.nextPop <= #s.popped then
        returnPopped(s)
      end
      if s and s.dirty then
        active[#active + 1] = gid
        active[#active + 1] = countText(s.active + s.flag * GROUP_FLAG)
        -- The index (the pages' order) stays within 16 jobs of the truth,
        -- exact as a group empties (an add writes it exactly).
        if s.waiting and (s.gone or s.waiting % 16 == 0) then
          index[#index + 1] = countText(s.waiting)
          index[#index + 1] = gid
        end
      end
      if s and s.turns ~= s.turnsRead then
        if s.turns == 0 then
          turnsDone[#turnsDone + 1] = gid
        else
          turns[#turns + 1] = gid
          turns[#turns + 1] = s.turns
        end
      end
    end
    if #active > 2 then
      rcall("HSET", prefix .. "groups:active", unpack(active))
    end
    if #index > 0 then
      rcall("ZADD", prefix .. "groups:index", "XX", unpack(index))
    end
    if #turns > 0 then
      rcall("HSET", prefix .. "groups:turns", unpack(turns))
    end
    if #turnsDone > 0 then
      rcall("HDEL", prefix .. "groups:turns", unpack(turnsDone))
    end
    if #st.dropped > 0 then
      rcall("SREM", prefix .. "groups:seated", unpack(st.dropped))
    end
    forgetGroups(prefix, st.forgets, true)
    st.groups, st.order, st.dropped, st.forgets = nil, nil, nil, nil
  end
  if st.ring then
    ringFlush(st.ring)
    st.ring = nil
  end
  if st.taken and #st.taken > 0 then
    rcall("LPUSH", st.activeKey, unpack(st.taken))
    rcall("ZREM", prefix .. "groups:waiting", unpack(st.taken))
    rcall("ZADD", prefix .. "groups:leases", st.leaseEnd, st.leaseOwner)
    rcall("HINCRBY", prefix .. "groups:meta", "running", #st.taken)
    st.taken = {}
  end
end

--[[
  The next turn of the rotation. Returns jobId, gid for a grouped job moved
  to `active` (its group's counters taken), or "*" when it is the ungrouped
  jobs' turn (or nothing else can run), or nil when no group can run now.
  `st.want`: how many jobs the call claims at most (the rotation read ahead).
]]
local function nextGroupedJob(q, prefix, now, st)
  if not st.groups then
    if not st.defaults then
      st.defaults = groupDefaults(prefix)
      st.plain = plainLimits(st.defaults)
      local limits = st.plain.__index
      st.limited = (limits.concurrency or limits.max) and true or false
    end
    st.groups, st.order, st.dropped, st.forgets = {}, {}, {}, {}
  end
  if not st.ring then
    st.ring = ringOpen(prefix .. "groups:ready", (st.want or 1) + RING_AHEAD)
  end
  local ring = st.ring
  for _ = 1, GROUP_STEP_LIMIT do
    -- (ringPeek only where the read entries ran out: a call per turn costs.)
    local gid = ring.items[ring.head]
    if gid == nil then
      gid = ringPeek(ring)
    end
    if not gid then
      return "*"
    end
    if gid == "*" then
      local waiting = ungroupedWaiting(q)
      ringAdvance(ring, waiting)
      if waiting then
        return "*"
      end
      rcall("HSET", prefix .. "groups:meta", "u", "0")
    else
      if st.groups[gid] == nil then
        loadStates(prefix, st, ring.items, ring.head)
      end
      local s = st.groups[gid]
      local blocked, untilMs
      if s.key then  -- something may hold it back (loadStates)
        blocked, untilMs = groupBlocked(prefix, gid, s, now)
      end
      local jobId
      if not blocked then
        local popped, i = s.popped, s.nextPop
        if popped and i <= #popped then
          -- The run of turns popped together goes on.
          jobId, s.nextPop, s.waiting = popped[i], i + 2, s.waiting - 1
        else
          local n = 1
          if st.runs and (s.weight > 1 or ring.whole) then
            n = runLength(st, ring, s)
          end
          if n == 1 then
            popped = rcall("ZPOPMIN", s.waitKey)
          else
            popped = rcall("ZPOPMIN", s.waitKey, n)
          end
          if #popped > 0 then
            -- A pop that came short emptied the group: no count to read.
            local left = 0
            if #popped == n + n then
              left = rcall("ZCARD", s.waitKey)
            end
            jobId, s.waiting = popped[1], left + #popped / 2 - 1
            if n > 1 then
              s.popped, s.nextPop = popped, 3
            end
          end
        end
      end
      if not jobId then
        ringAdvance(ring, false)
        if not blocked then
          s.waiting = 0
        end
        dropGroup(prefix, gid, s, blocked, untilMs, st)
      else
        st.taken[#st.taken + 1] = jobId  -- to active, out of groups:waiting
        s.active, s.dirty, s.flag = s.active + 1, true, 0
        if s.max then
          if rcall("INCR", s.key .. ":limiter") == 1 then
            rcall("PEXPIRE", s.key .. ":limiter", s.duration or 1000)
          end
        end
        if s.waiting == 0 then
          -- Empty now: out of the rotation at once (an add brings it back).
          ringAdvance(ring, false)
          dropGroup(prefix, gid, s, nil, nil, st)
        else
          -- Its turn ends after `weight` jobs, else it stays at the head.
          s.turns = s.turns + 1
          if s.turns >= s.weight then
            s.turns = 0
            local kept = ring.kept  -- ringAdvance(ring, true), inline
            kept[#kept + 1] = gid
            ring.head = ring.head + 1
          end
        end
        return jobId, gid
      end
    end
  end
  -- Every step dropped a group: let a worker come back for the rest.
  rcall("ZADD", q.marker, 0, "0")
  return nil
end
