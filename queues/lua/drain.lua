--[[
  Delete jobs waiting to run (docs/protocol.md §4.20), at most about ARGV[3]
  a call: `wait`, `paused`, `prioritized`, every group's waiting jobs and,
  when asked, `delayed` and `groups:delayed`; the current iteration of each
  job scheduler is kept. No events. One call for a million jobs would hold
  Redis for about ten seconds (other clients get BUSY after five), so the
  caller calls again while the reply says more may be left.

  KEYS[1] wait
  KEYS[2] paused
  KEYS[3] prioritized
  KEYS[4] delayed
  KEYS[5] pc

  ARGV[1] key prefix
  ARGV[2] "1" to drain delayed jobs too
  ARGV[3] how many jobs a call removes (it may go over by the number of job
          schedulers)

  Returns {jobs removed, 1 when more may be left else 0}.
]]
--- @include "base"
--- @include "remove"
--- @include "groups"

local prefix = ARGV[1]
local budget = tonumber(ARGV[3])
local removed = 0
-- Each source is read a window at a time from where workers take jobs
-- (the tail of a list, the lowest scores), its kept jobs staying there: a
-- window of what is left of the budget plus one job per scheduler (at most
-- one kept job each) holds that many jobs to remove when the source has
-- them. So a call that removes fewer than its budget has emptied them all.
local spare = rcall("ZCARD", prefix .. "repeat")

local function window()
  return budget - removed + spare
end

-- Remove the jobs of `ids` but the kept ones; returns the kept and the
-- removed, in order.
local function drainIds(ids)
  local kept, gone = {}, {}
  for _, jobId in ipairs(ids) do
    if isCurrentSchedulerIteration(prefix, prefix .. jobId, jobId) then
      kept[#kept + 1] = jobId
    else
      removeJob(prefix, jobId)
      removed = removed + 1
      gone[#gone + 1] = jobId
    end
  end
  return kept, gone
end

local function drainList(key)
  if removed >= budget then
    return
  end
  local ids = rcall("LRANGE", key, -window(), -1)
  if #ids == 0 then
    return
  end
  rcall("LTRIM", key, 0, -(#ids + 1))
  local kept = drainIds(ids)
  -- `kept` is in head-to-tail order; RPUSH puts it back at the tail.
  for i = 1, #kept, 7000 do
    rcall("RPUSH", key, unpack(kept, i, math.min(i + 6999, #kept)))
  end
end

local function drainSet(key)
  if removed >= budget then
    return
  end
  local _, gone = drainIds(rcall("ZRANGE", key, 0, window() - 1))
  for i = 1, #gone, 7000 do
    rcall("ZREM", key, unpack(gone, i, math.min(i + 6999, #gone)))
  end
end

-- Grouped jobs (docs/groups.md) by their tickets: in `groups:q` or parked.
local function drainTickets(key)
  if removed >= budget then
    return
  end
  for _, member in ipairs(rcall("ZRANGE", key, 0, window() - 1)) do
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

drainList(KEYS[1])
drainList(KEYS[2])
drainSet(KEYS[3])
if rcall("ZCARD", KEYS[3]) == 0 then
  rcall("DEL", KEYS[5])
end
if ARGV[2] == "1" then
  drainSet(KEYS[4])
end
drainTickets(prefix .. "groups:q")
if removed < budget then
  for _, gid in ipairs(rcall("SMEMBERS", prefix .. "groups:parked")) do
    drainTickets(groupKey(prefix, gid) .. ":parked")
    unmarkIfGone(prefix, "parked", gid, groupKey(prefix, gid) .. ":parked")
  end
end
if ARGV[2] == "1" then
  drainSet(prefix .. "groups:delayed")
end
local more = removed >= budget
if not more and groupsInUse(prefix) then  -- (a queue without groups gets no group key)
  recountParked(prefix)
end
return {removed, more and 1 or 0}
