--[[
  Delete a paused queue and all its jobs, up to `count` jobs per call
  (docs/protocol.md §4.17). Order: active (with locks), delayed, repeat (with scheduler
  hashes), completed, wait, paused, prioritized, failed, waiting-children;
  then the queue-level keys.

  KEYS[1] meta
  KEYS[2] base key ("bull:name:")

  ARGV[1] count (jobs per call)
  ARGV[2] "force" to proceed with active jobs

  Returns 1 while work remains, 0 when done, -1 not paused, -2 active jobs
  without force.
]]
--- @include "base"
--- @include "remove"

local base = KEYS[2]
local budget = tonumber(ARGV[1])
if rcall("HEXISTS", KEYS[1], "paused") == 0 then
  return -1
end
if ARGV[2] ~= "force" and rcall("LLEN", base .. "active") > 0 then
  return -2
end

local function deleteIds(ids, withLocks)
  for _, jobId in ipairs(ids) do
    local jobKey = base .. jobId
    removeDeduplicationKey(base, jobKey, jobId)
    removeJobKeys(jobKey)
    if withLocks then
      rcall("DEL", jobKey .. ":lock")
    end
  end
end

local function obliterateList(key, withLocks)
  local ids = rcall("LRANGE", key, -budget, -1)
  deleteIds(ids, withLocks)
  rcall("LTRIM", key, 0, -(#ids + 1))
  budget = budget - #ids
end

-- `tickets`: the zset holds groups' tickets (docs/groups.md), each named
-- `gid:KEY16:jobId`, not job ids.
local function obliterateSet(key, tickets)
  local ids = rcall("ZRANGE", key, 0, budget - 1)
  local n = #ids
  if tickets then
    for i = 1, n do
      local cut = string.find(ids[i], ":", 1, true)
      ids[i] = cut and string.sub(ids[i], cut + 18) or ids[i]
    end
  end
  deleteIds(ids, false)
  if n > 0 then
    rcall("ZREMRANGEBYRANK", key, 0, n - 1)
  end
  budget = budget - n
end

obliterateList(base .. "active", true)
if budget > 0 then obliterateSet(base .. "delayed") end
if budget > 0 then
  local ids = rcall("ZRANGE", base .. "repeat", 0, budget - 1)
  for _, id in ipairs(ids) do
    rcall("DEL", base .. "repeat:" .. id)
  end
  if #ids > 0 then
    rcall("ZREMRANGEBYRANK", base .. "repeat", 0, #ids - 1)
  end
  budget = budget - #ids
end
if budget > 0 then obliterateSet(base .. "completed") end
if budget > 0 then obliterateList(base .. "wait", false) end
if budget > 0 then obliterateList(base .. "paused", false) end
if budget > 0 then obliterateSet(base .. "prioritized") end
if budget > 0 then obliterateSet(base .. "failed") end
if budget > 0 then obliterateSet(base .. "waiting-children") end
if budget > 0 then obliterateSet(base .. "groups:delayed") end
-- Groups (docs/groups.md): every grouped waiting job (a ticket in
-- `groups:q`, or parked in its group), then each known group's keys; the
-- layout before 2026-12-07 listed them in `groups:waiting` too.
if budget > 0 then obliterateSet(base .. "groups:q", true) end
if budget > 0 then obliterateSet(base .. "groups:waiting") end
while budget > 0 do
  local gids = rcall("ZRANGE", base .. "groups:index", 0, 0)
  if #gids == 0 then
    break
  end
  local gkey = base .. "group:" .. gids[1]
  obliterateSet(gkey .. ":parked", true)
  if rcall("EXISTS", gkey .. ":parked") == 0 then
    rcall("DEL", gkey, gkey .. ":limiter", gkey .. ":wait", gkey .. ":q")
    rcall("ZREM", base .. "groups:index", gids[1])
    budget = budget - 1
  end
end
if budget <= 0 then
  return 1
end
-- Lists of tickets of groups the index had already forgotten.
-- (Below +inf: the tail's pin is no group; includes/groups.lua's
-- groupsWithTails, which this script does not include.)
local tails = rcall("ZRANGEBYSCORE", base .. "groups:tail", "-inf", "(+inf")
for _, gid in ipairs(tails) do
  rcall("DEL", base .. "group:" .. gid .. ":q")
end
rcall("DEL", base .. "groups:meta", base .. "groups:q", base .. "groups:tail",
  base .. "groups:timed", base .. "groups:waiting",
  base .. "groups:leases", base .. "groups:paused", base .. "groups:held",
  base .. "groups:active", base .. "groups:slotted", base .. "groups:parked",
  base .. "groups:own", base .. "groups:retag", base .. "groups:retagging",
  -- (the rotation layout's, on a queue no claim has upgraded yet)
  base .. "groups:ready", base .. "groups:seated", base .. "groups:turns")
rcall("DEL", base .. "events", base .. "delay", base .. "priority", base .. "stalled-check",
  base .. "stalled", base .. "id", base .. "pc", base .. "marker", base .. "limiter",
  base .. "metrics:completed", base .. "metrics:completed:data",
  base .. "metrics:failed", base .. "metrics:failed:data", KEYS[1])
return 0
