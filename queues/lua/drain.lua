--[[
  Delete every job waiting to run (docs/protocol.md §4.20): `wait`, `paused`,
  `prioritized`, every group's waiting jobs and, when asked, `delayed` (and
  `groups:delayed`); the current iteration of each job
  scheduler is kept. No events.

  KEYS[1] wait
  KEYS[2] paused
  KEYS[3] prioritized
  KEYS[4] delayed
  KEYS[5] pc

  ARGV[1] key prefix
  ARGV[2] "1" to drain delayed jobs too

  Returns the number of jobs removed.
]]
--- @include "base"
--- @include "remove"
--- @include "groups"

local prefix = ARGV[1]
local removed = 0

local function drainIds(ids)
  local kept = {}
  for _, jobId in ipairs(ids) do
    if isCurrentSchedulerIteration(prefix, prefix .. jobId, jobId) then
      kept[#kept + 1] = jobId
    else
      removeJob(prefix, jobId)
      removed = removed + 1
    end
  end
  return kept
end

for _, listKey in ipairs({KEYS[1], KEYS[2]}) do
  local kept = drainIds(rcall("LRANGE", listKey, 0, -1))
  rcall("DEL", listKey)
  -- `kept` is in head-to-tail order; RPUSH keeps it.
  for i = 1, #kept, 7000 do
    rcall("RPUSH", listKey, unpack(kept, i, math.min(i + 6999, #kept)))
  end
end
local setKeys = {KEYS[3]}
if ARGV[2] == "1" then
  setKeys[2] = KEYS[4]
end
for _, setKey in ipairs(setKeys) do
  local ids = rcall("ZRANGE", setKey, 0, -1)
  drainIds(ids)
  for _, jobId in ipairs(ids) do
    if rcall("EXISTS", prefix .. jobId) == 0 then
      rcall("ZREM", setKey, jobId)
    end
  end
end
if rcall("ZCARD", KEYS[3]) == 0 then
  rcall("DEL", KEYS[5])
end
-- Grouped jobs (docs/groups.md): every group's waiting jobs (their tickets
-- in `groups:q` and parked), and the grouped delayed ones when asked.
local function drainTickets(key)
  for _, member in ipairs(rcall("ZRANGE", key, 0, -1)) do
    local gid, _, jobId = ticketParts(member)
    if not isCurrentSchedulerIteration(prefix, prefix .. jobId, jobId) then
      if not unqueueGrouped(prefix, jobId, gid) then
        rcall("ZREM", key, member)  -- (its job is gone or names another ticket)
      end
      removeJob(prefix, jobId)
      removed = removed + 1
    end
  end
end
drainTickets(prefix .. "groups:q")
for _, gid in ipairs(rcall("SMEMBERS", prefix .. "groups:parked")) do
  drainTickets(groupKey(prefix, gid) .. ":parked")
  unmarkIfGone(prefix, "parked", gid, groupKey(prefix, gid) .. ":parked")
end
if groupsInUse(prefix) then  -- (a queue without groups gets no group key)
  recountParked(prefix)
end
if ARGV[2] == "1" then
  drainIds(rcall("ZRANGE", prefix .. "groups:delayed", 0, -1))
  for _, jobId in ipairs(rcall("ZRANGE", prefix .. "groups:delayed", 0, -1)) do
    if rcall("EXISTS", prefix .. jobId) == 0 then
      rcall("ZREM", prefix .. "groups:delayed", jobId)
    end
  end
end
return removed
