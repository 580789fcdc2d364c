--[[
  Move due delayed jobs (score <= (now+1)*4096-1), at most 1000 per call, to
  wait (LPUSH) or prioritized (fresh counter score), emitting
  `waiting {prev=delayed}` and resetting the hash `delay` to 0.
  Requires: base, markers, scores.
]]
local function promoteDelayedJobs(delayedKey, markerKey, waitKey, prioritizedKey,
                                  eventsKey, prefix, now, priorityCounterKey, isPausedOrMaxed)
  local jobs = rcall("ZRANGEBYSCORE", delayedKey, "0",
    intText((now + 1) * 0x1000 - 1), "LIMIT", "0", "1000")
  if #jobs > 0 then
    rcall("ZREM", delayedKey, unpack(jobs))
    for _, jobId in ipairs(jobs) do
      local jobKey = prefix .. jobId
      local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
      if priority == 0 then
        rcall("LPUSH", waitKey, jobId)
      else
        rcall("ZADD", prioritizedKey, getPriorityScore(priority, priorityCounterKey), jobId)
      end
      rcall("XADD", eventsKey, "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
      rcall("HSET", jobKey, "delay", 0)
    end
    addBaseMarkerIfNeeded(markerKey, isPausedOrMaxed)
  end
end
