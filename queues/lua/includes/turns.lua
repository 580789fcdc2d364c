--[[
  The claim's side of groups (docs/groups.md): tickets popped from
  `groups:q` in turn order, each taking its job (or, for a slotted group,
  the group's best), the limits of the groups that have any, and what one
  claim call writes back when it ends (flushGroupClaims). A plain group
  under no limit costs its job one pop from `groups:q` and nothing per
  group.
  Requires: base, markers, groups, retag.
]]

-- Whether ungrouped jobs wait (in `wait` or `prioritized`): one call, as
-- Redis keeps no empty list or zset.
local function ungroupedWaiting(q)
  return rcall("EXISTS", q.wait, q.prioritized) > 0
end

-- Read, for the groups of the popped tickets (`buf[from..]`) this call has
-- not met, what may make them other than plain: slotted (`groups:slotted`),
-- settings of their own, limits (then their running counts). Only such
-- groups get a state table (`st.gs`).
local function loadGroups(prefix, st, buf, from)
  local gids, seen = {}, st.seen
  for i = from, #buf, 2 do
    local gid = string.sub(buf[i], 1, string.find(buf[i], ":", 1, true) - 1)
    if not seen[gid] then
      seen[gid] = true
      gids[#gids + 1] = gid
    end
  end
  if #gids == 0 then
    return
  end
  local slotted, own, active = {}, {}, {}
  if st.slottedN > 0 then
    slotted = rcall("SMISMEMBER", prefix .. "groups:slotted", unpack(gids))
  end
  if st.ownN > 0 then
    own = rcall("SMISMEMBER", prefix .. "groups:own", unpack(gids))
  end
  if st.limited or st.ownN > 0 then
    active = rcall("HMGET", prefix .. "groups:active", unpack(gids))
  end
  for i = 1, #gids do
    local gid = gids[i]
    if slotted[i] == 1 or own[i] == 1 or st.limited then
      local key = groupKey(prefix, gid)
      local g = NO_SETTINGS
      if own[i] == 1 then
        g = rcall("HMGET", key, unpack(GROUP_STATE))
      end
      local s = applyLimits({key = key, slotted = slotted[i] == 1, dirty = false,
        active = tonumber(active[i]) or 0, timed = false}, g, st.defaults)
      s.check = own[i] == 1 or st.limited
      st.gs[gid] = s
      st.order[#st.order + 1] = gid
    end
  end
end

-- The ticket the job `take` owned now belongs to `owner`, whose own ticket
-- was just used for `take`: renamed to `owner`'s name (free: that ticket
-- was just used) wherever it is (this call's popped tickets, `groups:q` or
-- parked), so each waiting job owns the one ticket its name says.
local function renameTicket(prefix, gid, take, owner, st)
  local old = ticketOf(gid, take, rcall("HGET", prefix .. take, "gsq"))
  local new = ticketOf(gid, owner, rcall("HGET", prefix .. owner, "gsq"))
  local key = groupKey(prefix, gid)
  local function rename(zset, score)
    rcall("ZREM", zset, old)
    rcall("ZADD", zset, score, new)
  end
  local buf = st.buf
  for i = st.bi, #buf, 2 do
    if buf[i] == old then
      buf[i] = new
      rename(key .. ":q", buf[i + 1])
      return
    end
  end
  local turn = rcall("ZSCORE", prefix .. "groups:q", old)
  if turn then
    rename(prefix .. "groups:q", turn)
    rename(key .. ":q", turn)
    return
  end
  local parked = rcall("ZSCORE", key .. ":parked", old)
  if parked then
    rename(key .. ":parked", parked)
  end
end

-- A turn of a slotted group: the better of the ticket's own job and the
-- head of the group's zset (a leftover plain job's place is its seq).
-- Returns the job taken.
local function takeSlotted(prefix, gid, s, seq, jobId, st)
  local waitKey = s.key .. ":wait"
  local head = rcall("ZRANGE", waitKey, 0, 0, "WITHSCORES")
  local take = jobId
  if rcall("ZSCORE", waitKey, jobId) then
    take = head[1]
    rcall("ZREM", waitKey, take)
  elseif head[1] and tonumber(head[2]) < seq % GROUP_SPAN then
    take = head[1]
    rcall("ZREM", waitKey, take)
    rcall("ZADD", waitKey, seq % GROUP_SPAN, jobId)
  end
  if take ~= jobId then
    renameTicket(prefix, gid, take, jobId, st)
  end
  if unmarkIfGone(prefix, "slotted", gid, waitKey) then
    s.slotted = false
  end
  return take
end

-- Forget groups none of whose tickets is left in `groups:q`: those whose
-- last turn is before the one served (`v`), as many as the call took jobs
-- and 16 more (so that forgetting keeps up with one-job groups), and, once
-- `groups:q` is empty (the queue idles), any, IDLE_SWEEP a call. Their
-- lists of tickets go, and so does their `groups:index` entry when nothing
-- else keeps them (parked tickets, a zset, settings of their own, running
-- jobs under a limit): about one key deleted per group's life, not per
-- job. True when it left no group below `v`.
local function sweepGroups(prefix, v, st)
  local tailKey = prefix .. "groups:tail"
  -- Read without scores (Redis 7.0 formats each score with printf's %.17g).
  local gone, clear
  if st.emptied and rcall("EXISTS", prefix .. "groups:q") == 0 then
    gone = groupsWithTails(prefix, IDLE_SWEEP)
    clear = #gone < IDLE_SWEEP
  else
    local most = 16 + #st.taken
    gone = rcall("ZRANGEBYSCORE", tailKey, "-inf", "(" .. v, "LIMIT", 0, most)
    clear = #gone < most  -- (no group left below `v`)
  end
  if #gone == 0 then
    return clear
  end
  local lists = {}
  for i = 1, #gone do
    lists[i] = prefix .. "group:" .. gone[i] .. ":q"
  end
  rcall("UNLINK", unpack(lists))  -- (a long list is freed off the main thread)
  rcall("ZREM", tailKey, unpack(gone))
  local forget = gone
  if st.special or st.parkedN > 0 then
    forget = {}
    local parked = rcall("SMISMEMBER", prefix .. "groups:parked", unpack(gone))
    local slotted = rcall("SMISMEMBER", prefix .. "groups:slotted", unpack(gone))
    local own = rcall("SMISMEMBER", prefix .. "groups:own", unpack(gone))
    local active = rcall("HMGET", prefix .. "groups:active", unpack(gone))
    local kept = {}
    for i = 1, #gone do
      if parked[i] == 0 and slotted[i] == 0 and own[i] == 0 and
         (tonumber(active[i]) or 0) == 0 then
        forget[#forget + 1] = gone[i]
      elseif parked[i] == 0 and slotted[i] == 0 then
        kept[#kept + 1] = 0  -- known, nothing queued: last in the index's order
        kept[#kept + 1] = gone[i]
      end
    end
    if #kept > 0 then
      rcall("ZADD", prefix .. "groups:index", "XX", unpack(kept))
    end
  end
  if #forget > 0 then
    rcall("ZREM", prefix .. "groups:index", unpack(forget))
  end
  return clear
end

-- End of a claim call (or before anything else writes groups in it): the
-- popped tickets it did not use back in `groups:q`, the running counts of
-- limited groups, the turn served, drained groups swept, and the grouped
-- jobs it took on `active`, counted as running and under the lease of the
-- worker that took them (its token).
local function flushGroupClaims(prefix, st)
  local buf = st.buf
  if buf then
    if st.bi <= #buf then
      local back = {}
      for i = st.bi, #buf, 2 do
        back[#back + 1] = buf[i + 1]
        back[#back + 1] = buf[i]
      end
      rcall("ZADD", prefix .. "groups:q", unpack(back))
    end
    st.buf = nil
  end
  if st.gs then
    local writes = {GROUP_PIN, 0}
    for _, gid in ipairs(st.order) do
      local s = st.gs[gid]
      if s.dirty then
        writes[#writes + 1] = gid
        writes[#writes + 1] = countText(s.active)
        s.dirty = false
      end
    end
    if #writes > 2 then
      rcall("HSET", prefix .. "groups:active", unpack(writes))
    end
  end
  if st.meta then
    local metaKey = prefix .. "groups:meta"
    local moved = st.vm ~= st.meta.vm
    local v, sets = tonumber(st.v), {}
    -- Groups fall below the turn served only as it moves on (every tail is
    -- at or after it when written): once a sweep left none below turn `v`
    -- (`sw`), the claims of that turn need not look, unless idling.
    if (moved and v ~= st.meta.sw) or st.emptied then
      if sweepGroups(prefix, v, st) and v ~= st.meta.sw then
        sets = {"sw", v}
        st.meta.sw = v
      end
    end
    if moved then
      sets[#sets + 1], sets[#sets + 2] = "v", st.v
      sets[#sets + 1], sets[#sets + 2] = "vm", st.vm
      st.meta.vm = st.vm
    end
    if #sets > 0 then
      rcall("HSET", metaKey, unpack(sets))
    end
    if st.uDirty then
      if st.u then
        rcall("HSET", metaKey, "u", st.u)
      else
        rcall("HDEL", metaKey, "u")
      end
      st.uDirty = false
    end
  end
  local running = 0
  if st.carry then  -- (a finish's change of the running count, written with ours)
    running, st.carry.running = st.carry.running, 0
  end
  if st.taken and #st.taken > 0 then
    rcall("LPUSH", st.activeKey, unpack(st.taken))
    if st.leaseEnd then
      rcall("ZADD", prefix .. "groups:leases", st.leaseEnd, st.leaseOwner)
    end
    running = running + #st.taken
    st.taken = {}
  end
  if running ~= 0 then
    rcall("HINCRBY", prefix .. "groups:meta", "running", running)
  end
end

--[[
  The next turn. Returns jobId, gid for a grouped job moved to `active`
  (its group's counters taken), or "*" when it is the ungrouped jobs' turn
  (or no grouped job waits), or nil when none of the tickets met could run
  now. `st.want`: how many jobs the call claims at most.
]]
local function nextGroupedJob(q, prefix, now, st)
  if not st.meta then
    -- (What the finish before it in this call read, unless it changed since.)
    local m = st.carry and st.carry.meta
    if m then
      st.carry.meta = nil
    else
      m = rcall("HMGET", prefix .. "groups:meta", unpack(CLAIM_META))
    end
    if not m[1] and migrateRotation(prefix) then  -- (no turn served yet)
      m = rcall("HMGET", prefix .. "groups:meta", unpack(CLAIM_META))
    end
    if not m[13] then
      migrateWaiting(prefix)
    end
    if m[8] then  -- a weight change an admin left under way goes on
      retagGroups(prefix, RETAG_CLAIM_CHUNK)
    end
    st.meta = {vm = m[2] or "", sw = tonumber(m[7])}
    st.v, st.vm, st.u = tonumber(m[1]) or 0, m[2] or "", tonumber(m[3])
    if not st.u and ungroupedWaiting(q) then
      -- Ungrouped jobs wait: they take one turn per turn from the turn
      -- after the one served, as a group that joins behind those in it.
      st.u, st.uDirty = st.v + 1, true
    end
    st.ownN, st.slottedN = tonumber(m[4]) or 0, tonumber(m[5]) or 0
    st.parkedN = tonumber(m[6]) or 0
    st.defaults = {m[9], m[10], m[11], m[12]}
    st.limited = (limitOrNil(m[10]) or limitOrNil(m[11])) and true or false
    st.special = st.limited or st.ownN > 0 or st.slottedN > 0
    st.gs, st.seen, st.order = {}, {}, {}
  end
  for _ = 1, GROUP_STEP_LIMIT do
    local buf = st.buf
    if not buf or st.bi > #buf then
      local n = math.max((st.want or 1) - #st.taken, 1)
      buf = rcall("ZPOPMIN", prefix .. "groups:q", n)
      st.buf, st.bi = buf, 1
      if #buf < n + n then
        st.emptied = true  -- (a short pop emptied `groups:q`)
      end
      if st.special then
        loadGroups(prefix, st, buf, 1)
      end
    end
    local member, turn = buf[st.bi], buf[st.bi + 1]  -- (the turn as its text)
    if st.u and (not member or st.u <= tonumber(turn)) then
      st.uDirty = true
      if ungroupedWaiting(q) then
        st.u = st.u + 1
        return "*"
      end
      st.u = nil
    end
    if not member then
      st.emptied = true
      return "*"
    end
    st.bi = st.bi + 2
    -- (The FIFO key in the name only for a group with a state: a limit or a
    -- zset may need it.)
    local cut = string.find(member, ":", 1, true)
    local gid, jobId = string.sub(member, 1, cut - 1), string.sub(member, cut + 18)
    local s = st.gs[gid]
    local blocked, untilMs, key
    if s then
      key = tonumber(string.sub(member, cut + 1, cut + 16))
      if s.check then
        blocked, untilMs = groupBlocked(prefix, gid, s, now)
      end
    end
    if blocked then
      parkTicket(prefix, gid, member, key, jobId)
      s.slotted = true
      if untilMs and not s.timed then
        wakeGroupAt(prefix, gid, untilMs)
        s.timed = true
      end
    else
      if s and s.slotted then
        jobId = takeSlotted(prefix, gid, s, key, jobId, st)
      end
      st.taken[#st.taken + 1] = jobId  -- to active
      st.v, st.vm = turn, member
      if s and s.counted then
        s.active, s.dirty = s.active + 1, true
        if s.max then
          local started = rcall("INCR", s.key .. ":limiter")
          if started == 1 then
            rcall("PEXPIRE", s.key .. ":limiter", s.duration or 1000)
          end
          if started >= s.max and not s.timed then
            -- The window is full: its end gives parked tickets turns.
            wakeGroupAt(prefix, gid, now + math.max(rcall("PTTL", s.key .. ":limiter"), 0))
            s.timed = true
          end
        end
      end
      return jobId, gid
    end
  end
  -- Every step parked a ticket: let a worker come back for the rest.
  rcall("ZADD", q.marker, 0, "0")
  return nil
end
