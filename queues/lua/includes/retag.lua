--[[
  A weight changed (docs/groups.md): the group's queued tickets take turns
  again from the turn after the one served, its weight per turn, in their
  order, RETAG_CHUNK tickets a call so that no call blocks Redis in
  proportion to the backlog or the groups. The groups to re-turn wait in
  `groups:retag` (score 1: its own weight changed; 0: the default did,
  which a group with a weight of its own skips), a default's a page at a
  time (`scanTails`); one that takes more than a call keeps where it
  stands in `groups:retagging` (gid -> state), and `groups:meta` field
  `rt` says some wait (a claim goes on with them: an admin that stops
  between calls leaves no half-done weight for good).

  A large backlog goes in chunks without ever putting a ticket before one
  that came earlier in its group, whatever turns the tickets held: each
  call takes a run of tickets from the front (the next slots) or from the
  back (the backlog's last slots, so adds meanwhile go after them), as far
  as it may without passing the ticket beside the run (retagStep).
  Requires: base, markers, groups.
]]
--- Tickets one call gives turns again at most (about 3 ms of Redis).
local RETAG_CHUNK = 1000
--- What a claim does of a re-turn an admin left (none while one goes on).
local RETAG_CLAIM_CHUNK = 100
--- What a group's own reads and writes count for against a call's budget,
--- in tickets (at 10 tickets a group, a call of 1,000 took 10 ms without).
local RETAG_GROUP_COST = 10

-- The slot `k` slots after (turn, used) at weight w, never at or before
-- the turn served `v`.
local function slotsAfter(turn, used, w, v, k)
  if turn <= v then
    turn, used = v, w
  end
  local total = math.min(used, w) + k
  return turn + math.floor((total - 1) / w), (total - 1) % w + 1
end

-- The slot before (turn, used) at weight w.
local function slotBefore(turn, used, w)
  if used > 1 then
    return turn, used - 1
  end
  return turn - 1, w
end

-- Entries of the group's list of tickets strictly between (loS, loM) and
-- (hiS, hiM) (nil: no upper bound), in order (`rev`: from the back), with
-- their turns, `limit` at most. (The list keeps taken tickets below the
-- turn served: callers bound it below by (v, vm).)
local function ticketsBetween(listKey, loS, loM, hiS, hiM, limit, rev)
  local out = {}
  local function keep(member, score)
    if #out < limit * 2 and not (score == loS and member <= loM) and
       not (hiS and score == hiS and member >= hiM) then
      out[#out + 1] = member
      out[#out + 1] = score
    end
  end
  local function edge(score)  -- (the entries at a bound's own turn)
    local same = rcall("ZRANGEBYSCORE", listKey, score, score)
    local from, to, step = 1, #same, 1
    if rev then
      from, to, step = #same, 1, -1
    end
    for i = from, to, step do
      keep(same[i], score)
    end
  end
  local rest
  if rev then
    if hiS then
      edge(hiS)
    end
    if not hiS or hiS > loS then
      rest = rcall("ZREVRANGEBYSCORE", listKey, hiS and "(" .. hiS or "+inf",
        "(" .. loS, "WITHSCORES", "LIMIT", 0, limit - #out / 2)
    end
  else
    edge(loS)
    if not hiS or hiS > loS then
      rest = rcall("ZRANGEBYSCORE", listKey, "(" .. loS, hiS or "+inf", "WITHSCORES",
        "LIMIT", 0, limit - #out / 2)
    end
  end
  for i = 1, #(rest or {}), 2 do
    keep(rest[i], tonumber(rest[i + 1]))
  end
  if rev and (not hiS or hiS > loS) then
    edge(loS)
  end
  return out
end

-- Write tickets' turns (pairs turn, member) to `groups:q` (only those
-- still there) and the group's list.
local function writeTurns(prefix, listKey, pairs_)
  if #pairs_ > 0 then
    rcall("ZADD", prefix .. "groups:q", "XX", unpack(pairs_))
    rcall("ZADD", listKey, unpack(pairs_))
  end
end

-- The group's tickets end at `turn` (`used` of its slots): its tail and
-- its index entry.
local function endTurns(prefix, gid, turn, used)
  local tailKey = prefix .. "groups:tail"
  pinTail(tailKey)
  rcall("ZADD", tailKey, turn + used / TURN_USED, gid)
  rcall("ZADD", prefix .. "groups:index", turn, gid)
end

-- The front's run: the tickets left after (loS, loM) (`budget` + 1 at
-- most), the next slots for them, and how many may take theirs (`p`: the
-- last no later than the turn of the ticket after it).
local function frontRun(listKey, st, w, v, loS, loM, budget)
  local run = {tickets = ticketsBetween(listKey, loS, loM, st.bs, st.bm, budget + 1, false),
    slots = {}, p = 0}
  run.count = #run.tickets / 2
  run.all = run.count <= budget  -- (every ticket left was read)
  local t, u = st.ft, st.fu
  for j = 1, math.min(run.count, budget) do
    t, u = slotsAfter(t, u, w, v, 1)
    run.slots[j] = {t, u}
    local after = run.tickets[2 * j + 2] or st.bs  -- (nil: none)
    if not after or t <= after then
      run.p = j
    end
  end
  return run
end

-- The back's run: the tickets left from the last, the slots before the
-- back's for them (each with the slot before it), and how many may take
-- theirs (the first no earlier than the turn of the ticket before it).
-- `left`: how many tickets are left, when known (the back's first run
-- starts at the backlog's last slot).
local function backRun(key, st, w, v, loS, loM, budget, left)
  local listKey = key .. ":q"
  local run = {tickets = ticketsBetween(listKey, loS, loM, st.bs, st.bm, budget + 1, true),
    slots = {}, p = 0}
  run.count = #run.tickets / 2
  run.all = run.count <= budget
  local bt, bu = st.bt, st.bu
  if not st.bs then
    bt, bu = slotsAfter(st.ft, st.fu, w, v, left or (queuedTickets(key, loS, loM, 0)))
  end
  for j = 1, math.min(run.count, budget) do
    local at = math.max(bt, v + 1)
    local slot = {at, at == bt and bu or w}
    local before = run.tickets[2 * j + 2] or st.fs
    if not before or before <= at then
      run.p = j
    end
    bt, bu = slotBefore(bt, bu, w)
    slot[3], slot[4] = bt, bu
    run.slots[j] = slot
  end
  return run
end

-- One call's part of the group's re-turn at weight w (`m`: turnMeta),
-- `budget` tickets at most. `state` (nil: it starts) has the front's last
-- slot (ft, fu) and ticket (fs, fm), and once the back started, its next
-- slot (bt, bu) and first ticket (bs, bm); the tickets left are between.
-- Each call takes the longest run it may from either end: from the front,
-- the next slots while the last stays at or before the turn of the ticket
-- after it; from the back, the slots before while the first stays at or
-- after the turn of the ticket before it. From a backlog one weight laid
-- out, one of the two goes far: a weight that packs it, the front; one
-- that spreads it, the back. Where neither may (a layout no one weight
-- made, as tickets parked and given turns again can leave), the next ticket
-- goes no further than the one after it. Where the two ends meet, a turn may hold up to twice the
-- weight (claims moved the turn served on between calls). Returns the
-- tickets it gave turns, the state to keep (nil: done) and the weight.
local function retagStep(prefix, gid, state, w, m, budget)
  local v, vm = tonumber(m[1]) or 0, m[2] or ""
  local key = groupKey(prefix, gid)
  local listKey = key .. ":q"
  local st
  if state then
    st = cjson.decode(state)
    w = st.w  -- (the weight it started with: a change meanwhile waits for the end)
  else
    local n, tickets = queuedTickets(key, v, vm, budget)
    if n == 0 then
      return 1, nil, w
    end
    if n <= budget then  -- (the whole backlog at once, as always)
      rcall("ZADD", prefix .. "groups:index", 0, gid)  -- (its drain turn is set anew)
      giveTurns(prefix, gid, tickets, w, v + 1, true)
      return n, nil, w
    end
    st = {ft = v, fu = w, w = w}
  end
  local loS, loM = v, vm
  if st.fs and (st.fs > v or (st.fs == v and st.fm > vm)) then
    loS, loM = st.fs, st.fm
  end
  -- The end that went last goes first; the other is read when it cannot
  -- take a whole chunk.
  local f, b
  if st.dir == "b" then
    b = backRun(key, st, w, v, loS, loM, budget)
    if b.count > 0 and b.p < math.min(b.count, budget) then
      f = frontRun(listKey, st, w, v, loS, loM, budget)
    end
  else
    f = frontRun(listKey, st, w, v, loS, loM, budget)
    if f.count > 0 and f.p < math.min(f.count, budget) then
      b = backRun(key, st, w, v, loS, loM, budget, f.all and f.count)
    end
  end
  if (f or b).count == 0 then  -- (claims took what was left)
    if not st.bs and st.fs then
      endTurns(prefix, gid, st.ft, st.fu)
    end
    return 1, nil, w
  end
  local pairs_, done = {}, false
  if b and b.p > (f and f.p or 0) then
    for j = 1, b.p do
      pairs_[#pairs_ + 1] = b.slots[j][1]
      pairs_[#pairs_ + 1] = b.tickets[2 * j - 1]
    end
    if not st.bs then  -- (its last ticket: the group's turns end there)
      endTurns(prefix, gid, b.slots[1][1], b.slots[1][2])
    end
    st.bs, st.bm = b.slots[b.p][1], b.tickets[2 * b.p - 1]
    st.bt, st.bu = b.slots[b.p][3], b.slots[b.p][4]
    st.dir, done = "b", b.all and b.p == b.count
  else
    local p = f.p
    if p == 0 then  -- (neither end may: the next ticket no further than the one after)
      p = 1
      local after = f.tickets[4] or st.bs
      local at = math.max(f.slots[1][1], f.tickets[2])
      f.slots[1] = {after and math.min(at, after) or at, w}
    end
    for j = 1, p do
      pairs_[#pairs_ + 1] = f.slots[j][1]
      pairs_[#pairs_ + 1] = f.tickets[2 * j - 1]
    end
    st.ft, st.fu = f.slots[p][1], f.slots[p][2]
    st.fs, st.fm = f.slots[p][1], f.tickets[2 * p - 1]
    st.dir, done = "f", f.all and p == f.count
    if done and not st.bs then
      endTurns(prefix, gid, st.ft, math.min(st.fu, w))
    end
  end
  writeTurns(prefix, listKey, pairs_)
  if done then
    return #pairs_ / 2, nil, w
  end
  return #pairs_ / 2, cjson.encode(st), w
end

-- The next page of groups with a tail for a default weight's re-turn
-- (`groups:meta` field `rts`: the ZSCAN cursor, "s" to start; gone once
-- the scan ended) into `groups:retag`, or false when none is left to scan.
-- (ZSCAN: every group with a tail all along is met, at a page a call;
-- one that arrives meanwhile took turns at the new weight anyway.)
local function scanTails(prefix, pendingKey)
  local metaKey = prefix .. "groups:meta"
  local cursor = rcall("HGET", metaKey, "rts")
  if not cursor then
    return false
  end
  local page = rcall("ZSCAN", prefix .. "groups:tail", cursor == "s" and 0 or cursor,
    "COUNT", 100)
  if page[1] == "0" then
    rcall("HDEL", metaKey, "rts")
  else
    rcall("HSET", metaKey, "rts", page[1])
  end
  local members = page[2]
  for i = 1, #members, 2 do
    if members[i] ~= GROUP_PIN then
      rcall("ZADD", pendingKey, "NX", 0, members[i])
    end
  end
  return true
end

-- Re-turn groups waiting in `groups:retag` (and those a default weight's
-- scan finds), `budget` tickets at most. True when some remain.
local function retagGroups(prefix, budget)
  local pendingKey, stateKey = prefix .. "groups:retag", prefix .. "groups:retagging"
  local m = turnMeta(prefix)
  while budget > 0 do
    budget = budget - RETAG_GROUP_COST
    local first = rcall("ZRANGE", pendingKey, 0, 0, "WITHSCORES")
    if #first == 0 then
      if not scanTails(prefix, pendingKey) then
        rcall("HDEL", prefix .. "groups:meta", "rt")
        return false
      end
    else
      local gid = first[1]
      local state = rcall("HGET", stateKey, gid)
      local w = groupWeight(prefix, gid, m)
      -- (A default changed, and it has a weight of its own: nothing to do.)
      local skip = not state and first[2] == "0" and (tonumber(m[4]) or 0) > 0 and
        rcall("HGET", groupKey(prefix, gid), "weight")
      local again = false
      if not skip then
        local n, target
        n, state, target = retagStep(prefix, gid, state, w, m, math.max(budget, 1))
        budget = budget - n
        -- Its weight changed while the chunks went: once more, at the new one
        -- (a re-turn started over part-way could have to move tickets past
        -- each other).
        again = not state and target ~= w
      end
      if state then
        rcall("HSET", stateKey, gid, state)
      else
        rcall("HDEL", stateKey, gid)
        if not again then
          rcall("ZREM", pendingKey, gid)
        end
      end
    end
  end
  return true
end

-- The group's queued tickets (`gid`; nil: of every group with a tail,
-- which skip it when they have a weight of their own) take turns at the
-- weight it has now: this call's first chunk. True when some remain.
local function retagLater(prefix, gid)
  local metaKey = prefix .. "groups:meta"
  if gid then
    rcall("ZADD", prefix .. "groups:retag", 1, gid)
    rcall("HSET", metaKey, "rt", 1)
  else
    rcall("HSET", metaKey, "rt", 1, "rts", "s")
  end
  return retagGroups(prefix, RETAG_CHUNK)
end
