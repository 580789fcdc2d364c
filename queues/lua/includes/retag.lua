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
  that came earlier in its group, whatever turns the tickets held:
  - a weight that packs the backlog into fewer turns goes from the front:
    each chunk's tickets take the next slots, never past the turn of the
    first ticket left (the chunk ends before it);
  - one that spreads it goes from the back: the last ticket takes the slot
    the whole backlog would end at (the group's tail, so adds meanwhile go
    after it), each chunk the slots before, never before its own turn.
  Requires: base, markers, groups.
]]
--- Tickets one call gives turns again at most (about 3 ms of Redis).
local RETAG_CHUNK = 1000
--- What a claim does of a re-turn an admin left (none while one goes on).
local RETAG_CLAIM_CHUNK = 100
--- What a group's own reads and writes count for against a call's budget,
--- in tickets (at 10 tickets a group, a call of 1,000 took 10 ms without).
local RETAG_GROUP_COST = 10

-- The next slot after (turn, used) at weight w, never at or before `v`.
local function slotAfter(turn, used, w, v)
  if used >= w then
    turn, used = turn + 1, 0
  end
  if turn <= v then
    return v + 1, 1
  end
  return turn, used + 1
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
    rest = rcall("ZRANGEBYSCORE", listKey, "(" .. loS, "+inf", "WITHSCORES",
      "LIMIT", 0, limit - #out / 2)
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

-- One call's part of the group's re-turn at weight w: `state` as the last
-- call left it (nil: it starts), `m` turnMeta. Returns the tickets it gave
-- turns (at least 1) and the state to keep (nil: done).
local function retagStep(prefix, gid, state, w, m, budget)
  local v, vm = tonumber(m[1]) or 0, m[2] or ""
  local key = groupKey(prefix, gid)
  local listKey = key .. ":q"
  local mode, turn, used, cs, cm
  if not state then
    local n, tickets = queuedTickets(key, v, vm, budget)
    if n == 0 then
      return 1, nil
    end
    if n <= budget then  -- (the whole backlog at once, as always)
      rcall("ZADD", prefix .. "groups:index", 0, gid)  -- (its drain turn is set anew)
      giveTurns(prefix, gid, tickets, w, v + 1, true)
      return n, nil
    end
    local last = v + 1 + math.floor((n - 1) / w)
    if last < math.floor(tonumber(rcall("ZSCORE", prefix .. "groups:tail", gid)) or 0) then
      mode, turn, used = "f", v, w
    else
      mode, turn, used = "b", last, (n - 1) % w + 1
    end
  else
    local cut = cjson.decode(state)
    mode, turn, used, cs, cm = cut[1], cut[2], cut[3], cut[4], cut[5]
  end
  local pairs_ = {}
  if mode == "f" then
    local loS, loM = v, vm
    if cs and (cs > v or (cs == v and cm > vm)) then
      loS, loM = cs, cm
    end
    local tickets = ticketsBetween(listKey, loS, loM, nil, nil, budget + 1, false)
    local count = math.min(#tickets / 2, budget)
    local limit = tickets[count * 2 + 2]  -- (the first ticket left: none past it)
    for i = 1, count * 2, 2 do
      turn, used = slotAfter(turn, used, w, v)
      if limit and turn > limit then
        turn = limit
      end
      pairs_[#pairs_ + 1] = turn
      pairs_[#pairs_ + 1] = tickets[i]
    end
    writeTurns(prefix, listKey, pairs_)
    if not limit then
      if count > 0 then
        endTurns(prefix, gid, turn, math.min(used, w))
      end
      return math.max(count, 1), nil
    end
    return count, cjson.encode({mode, turn, used, turn, tickets[count * 2 - 1]})
  end
  local tickets = ticketsBetween(listKey, v, vm, cs, cm, budget, true)
  local count = #tickets / 2
  for i = 1, #tickets, 2 do
    local at = math.max(turn, tickets[i + 1], v + 1)
    if not cs then  -- (the last ticket: the group's turns end there)
      endTurns(prefix, gid, at, at == turn and used or w)
    end
    cs, cm = at, tickets[i]
    pairs_[#pairs_ + 1] = at
    pairs_[#pairs_ + 1] = tickets[i]
    if used > 1 then
      used = used - 1
    else
      turn, used = turn - 1, w
    end
  end
  writeTurns(prefix, listKey, pairs_)
  if count < budget then
    return math.max(count, 1), nil
  end
  return count, cjson.encode({mode, turn, used, cs, cm})
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
      local own = first[2] == "0" and (tonumber(m[4]) or 0) > 0 and
        rcall("HGET", groupKey(prefix, gid), "weight")
      local state
      if not own then  -- (else a default changed, and it has a weight of its own)
        local n
        n, state = retagStep(prefix, gid, rcall("HGET", stateKey, gid),
          groupWeight(prefix, gid, m), m, math.max(budget, 1))
        budget = budget - n
      end
      if state then
        rcall("HSET", stateKey, gid, state)
      else
        rcall("ZREM", pendingKey, gid)
        rcall("HDEL", stateKey, gid)
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
    rcall("HDEL", prefix .. "groups:retagging", gid)  -- (one under way starts again)
    rcall("HSET", metaKey, "rt", 1)
  else
    rcall("DEL", prefix .. "groups:retagging")  -- (ones under way start again)
    rcall("HSET", metaKey, "rt", 1, "rts", "s")
  end
  return retagGroups(prefix, RETAG_CHUNK)
end
