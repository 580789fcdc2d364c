--[[
  The stalled-job check (docs/protocol.md §4.9). At most once per stalledInterval
  across all workers (mutex `stalled-check`): every id still in `stalled`
  whose lock has expired is taken out of `active`, its `stc` incremented,
  marked with `defa` once stc > maxStalledCount (unless it belongs to a live
  job scheduler), pushed to the tail of `wait` to run next, with `waiting
  {prev=active}` and `stalled` emitted. Then every id in `active` becomes a
  candidate for the next check. Before the mutex, grouped active jobs whose
  worker's lease in `groups:leases` ended go back to the front of their group.

  KEYS[1] stalled
  KEYS[2] wait
  KEYS[3] active
  KEYS[4] stalled-check
  KEYS[5] meta
  KEYS[6] events
  KEYS[7] marker

  ARGV[1] key prefix
  ARGV[2] now (ms)
  ARGV[3] maxStalledCount
  ARGV[4] stalledInterval (ms)

  Returns the ids moved back to wait.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "groups"

local prefix = ARGV[1]
-- Grouped jobs first, whoever holds the mutex: their locks never expire
-- (a Node worker's check never moves them), their workers' leases do
-- (docs/groups.md). A lapsed lease's jobs are found in `active` by their
-- lock (no expiry, a token of that worker): a walk of `active` as the
-- check below takes, and only when a worker's lease lapsed.
local recovered = {}
local leasesKey = prefix .. "groups:leases"
-- The earliest lease first: a queue without grouped work pays one read.
local lapsed = {}
local earliest = rcall("ZRANGE", leasesKey, "0", "0", "WITHSCORES")
if earliest[2] then
  local nowMs = serverTimeMs()
  if tonumber(earliest[2]) <= nowMs then
    lapsed = rcall("ZRANGEBYSCORE", leasesKey, "-inf", intText(nowMs), "LIMIT", "0", "100")
  end
end
if #lapsed > 0 then
  local owners = {}
  for _, owner in ipairs(lapsed) do
    owners[owner] = true
  end
  local held = {}
  local total = rcall("LLEN", KEYS[3])
  for first = 0, total - 1, 1000 do
    for _, jobId in ipairs(rcall("LRANGE", KEYS[3], first, first + 999)) do
      local lockKey = prefix .. jobId .. ":lock"
      local token = rcall("GET", lockKey)
      local owner = token and string.match(token, "^(.*):[^:]*$")
      if owner and owners[owner] and rcall("PTTL", lockKey) == -1 then
        held[#held + 1] = jobId
      end
    end
  end
  for _, jobId in ipairs(held) do
    local jobKey = prefix .. jobId
    local gid = jobGroup(jobKey)
    rcall("DEL", jobKey .. ":lock")
    rcall("LREM", KEYS[3], 1, jobId)
    if not gid then
      -- Not a grouped job after all (its hash lost `gid`): back to `wait`.
      rcall("RPUSH", KEYS[2], jobId)
    else
      groupJobLeft(prefix, gid)
      local stalledCount = rcall("HINCRBY", jobKey, "stc", 1)
      if stalledCount > tonumber(ARGV[3]) then
        rcall("HSET", jobKey, "defa", "job stalled more than allowable limit")
      end
      local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
      enqueueGrouped(prefix, jobKey, jobId, gid, priority, false, true)
      rcall("XADD", KEYS[6], "*", "event", "waiting", "jobId", jobId, "prev", "active")
      rcall("XADD", KEYS[6], "*", "event", "stalled", "jobId", jobId)
    end
    recovered[#recovered + 1] = jobId
  end
  rcall("ZREM", leasesKey, unpack(lapsed))
end
if rcall("EXISTS", KEYS[4]) == 1 then
  return recovered
end
rcall("SET", KEYS[4], ARGV[2], "PX", ARGV[4])
trimEvents(KEYS[5], KEYS[6])
local maxStalledCount = tonumber(ARGV[3])
local stalledIds = rcall("SMEMBERS", KEYS[1])
local moved = recovered
if #stalledIds > 0 then
  rcall("DEL", KEYS[1])
  for _, jobId in ipairs(stalledIds) do
    if string.sub(jobId, 1, 2) == "0:" then
      rcall("LREM", KEYS[3], 1, jobId)
    else
      local jobKey = prefix .. jobId
      if rcall("EXISTS", jobKey .. ":lock") == 0 and rcall("LREM", KEYS[3], 1, jobId) > 0 then
        local stalledCount = rcall("HINCRBY", jobKey, "stc", 1)
        if stalledCount > maxStalledCount then
          local rjk = rcall("HGET", jobKey, "rjk")
          local liveScheduler = rjk and (rcall("EXISTS", prefix .. "repeat:" .. rjk) == 1 or
            rcall("ZSCORE", prefix .. "repeat", rjk))
          if not liveScheduler then
            rcall("HSET", jobKey, "defa", "job stalled more than allowable limit")
          end
        end
        rcall("RPUSH", KEYS[2], jobId)
        addBaseMarkerIfNeeded(KEYS[7], isQueuePausedOrMaxed(KEYS[5], KEYS[3]))
        rcall("XADD", KEYS[6], "*", "event", "waiting", "jobId", jobId, "prev", "active")
        rcall("XADD", KEYS[6], "*", "event", "stalled", "jobId", jobId)
        moved[#moved + 1] = jobId
      end
    end
  end
end
local active = rcall("LRANGE", KEYS[3], 0, -1)
for i = 1, #active, 7000 do
  rcall("SADD", KEYS[1], unpack(active, i, math.min(i + 6999, #active)))
end
return moved
