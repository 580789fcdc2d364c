--[[
  Reads of groups for pages and reasons (queues/groups.py, docs/groups.md):
  what the ticket layout keeps lazily, read in one call.

  KEYS[1] groups:meta (every other key derives from the prefix)

  ARGV[1] key prefix
  ARGV[2] mode: `groups`, `jobs`, `ranks` or `unlisted`

  groups: ARGV[3] how many ids of `active` to look at for running jobs of
  groups without a count (0: none, their running is 0); ARGV[4..] group ids. Returns, per group,
  {waiting, running, in groups:q, tickets ahead of its first (-1: none)}.

  jobs: ARGV[3] group id, ARGV[4] how many (-1: all); returns the group's
  first waiting job ids in the order its turns will take them.

  ranks: ARGV[3..] pairs of group id and job id; returns, per job, how
  many of its group's waiting jobs its group's turns take before it (-1:
  it does not wait in its group).

  unlisted: ARGV[3] how many ids of `active` to look at. Returns, sorted,
  the groups with jobs running there that `groups:index` no longer lists
  (forgotten: nothing waiting, nothing of their own); none, without a
  look, when `groups:meta` counts no grouped job running.
]]
--- @include "base"
--- @include "markers"
--- @include "groups"

local prefix, mode = ARGV[1], ARGV[2]
local m = rcall("HMGET", KEYS[1], "v", "vm")
local v, vm = tonumber(m[1]) or 0, m[2] or ""

if mode == "groups" then
  local gids = {unpack(ARGV, 4)}
  if #gids == 0 then
    return {}
  end
  local counted = rcall("HMGET", prefix .. "groups:active", unpack(gids))
  local running, scanned = {}, false
  local out = {}
  for i, gid in ipairs(gids) do
    local key = groupKey(prefix, gid)
    local inQueue, first = queuedTickets(key, v, vm, 1)
    local ahead = -1
    if first[1] then
      ahead = rcall("ZRANK", prefix .. "groups:q", first[1]) or -1
    end
    local run = tonumber(counted[i])
    if not run then
      if not scanned then
        scanned = true
        local scan = tonumber(ARGV[3])
        if scan > 0 then  -- (0: the caller does not use running counts)
          running = runningByGroup(prefix, scan - 1)
        end
      end
      run = running[gid] or 0
    end
    out[i] = {inQueue + rcall("ZCARD", key .. ":parked"), run, inQueue, ahead}
  end
  return out
end

if mode == "jobs" then
  local gid, want = ARGV[3], tonumber(ARGV[4])
  if want < 0 then  -- all of them
    want = 2147483647
  end
  local key = groupKey(prefix, gid)
  -- The group's zset (slotted and parked jobs, by place) and the jobs of
  -- its tickets that are not in it (plain ones, placed by seq), merged.
  local slotted = rcall("ZRANGE", key .. ":wait", 0, want - 1, "WITHSCORES")
  local _, tickets = queuedTickets(key, v, vm, want + #slotted / 2)
  local plain = {}
  for _, member in ipairs(tickets) do
    local _, seq, jobId = ticketParts(member)
    if not rcall("ZSCORE", key .. ":wait", jobId) then
      plain[#plain + 1] = {seq % GROUP_SPAN, jobId}
    end
  end
  local out, i, j = {}, 1, 1
  while #out < want and (i <= #slotted or j <= #plain) do
    local s = slotted[i + 1] and tonumber(slotted[i + 1])
    if s and (not plain[j] or s < plain[j][1]) then
      out[#out + 1] = slotted[i]
      i = i + 2
    else
      out[#out + 1] = plain[j][2]
      j = j + 1
    end
  end
  return out
end
if mode == "ranks" then
  local out = {}
  for i = 3, #ARGV, 2 do
    local gid, jobId = ARGV[i], ARGV[i + 1]
    local key = groupKey(prefix, gid)
    local rank = -1
    local score = rcall("ZSCORE", key .. ":wait", jobId)
    local gsq = redis.pcall("HGET", prefix .. jobId, "gsq")
    local ticket = ticketOf(gid, jobId, type(gsq) == "string" and gsq or nil)
    if score then
      -- In the zset: the zset's jobs before it, and the plain jobs (seq
      -- before its score) whose tickets are in the queue (a few thousand
      -- looked at).
      rank = rcall("ZCOUNT", key .. ":wait", "-inf", "(" .. score)
      local _, tickets = queuedTickets(key, v, vm, 5000)
      for _, member in ipairs(tickets) do
        local _, seq, other = ticketParts(member)
        if seq % GROUP_SPAN < tonumber(score) and
           not rcall("ZSCORE", key .. ":wait", other) then
          rank = rank + 1
        end
      end
    elseif type(ticket) == "string" and rcall("ZSCORE", prefix .. "groups:q", ticket) then
      -- A plain job: its group's tickets in the queue before its own, and
      -- the zset's jobs before its seq.
      local before = rcall("ZRANK", key .. ":q", ticket) or 0
      local stale = rcall("ZCOUNT", key .. ":q", "-inf", "(" .. v)
      for _, member in ipairs(rcall("ZRANGEBYSCORE", key .. ":q", v, v)) do
        if member <= vm then
          stale = stale + 1
        end
      end
      local _, seq = ticketParts(ticket)
      rank = before - stale + rcall("ZCOUNT", key .. ":wait", "-inf", "(" .. (seq % GROUP_SPAN))
    end
    out[#out + 1] = rank
  end
  return out
end
if mode == "unlisted" then
  local out = {}
  if (tonumber(rcall("HGET", KEYS[1], "running")) or 0) <= 0 then
    return out
  end
  local gids = {}
  for gid in pairs(runningByGroup(prefix, tonumber(ARGV[3]) - 1)) do
    gids[#gids + 1] = gid
  end
  table.sort(gids)
  local indexKey = prefix .. "groups:index"
  for from = 1, #gids, 1000 do  -- (unpack's bound on arguments)
    local upto = math.min(from + 999, #gids)
    local scores = rcall("ZMSCORE", indexKey, unpack(gids, from, upto))
    for i = from, upto do
      if not scores[i - from + 1] then
        out[#out + 1] = gids[i]
      end
    end
  end
  return out
end
return redis.error_reply("unknown group read " .. tostring(mode))
