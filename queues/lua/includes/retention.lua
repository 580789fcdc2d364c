--[[
  Retention of finished jobs (docs/protocol.md §4.7 step 11): by age (seconds, at
  most `limit` per call) and by count (keep the newest `count`).
  Requires: base, remove, parents.
]]

-- Retention deletes are "soft" (docs/protocol.md §4.16): a parent whose last pending
-- dependency this was is released with its `waiting` event, and the
-- deduplication key is left alone (it was settled when the job finished).
local function removeFinishedJob(prefix, jobId, now)
  local jobKey = prefix .. jobId
  local parentKey = rcall("HGET", jobKey, "parentKey")
  if parentKey and rcall("SREM", parentKey .. ":dependencies", jobKey) == 1 then
    local parentId = string.match(parentKey, ".*:(.*)$")
    local parentQueueKey = string.sub(parentKey, 1, #parentKey - #parentId - 1)
    releaseParentIfReady(parentQueueKey, parentKey, parentId, now, false)
  end
  removeJobKeys(jobKey)
end

local function removeJobsByMaxAge(now, maxAge, targetSet, prefix, limit)
  local cutoff = now - maxAge * 1000
  local jobIds = rcall("ZREVRANGEBYSCORE", targetSet, cutoff, "-inf", "LIMIT", 0, limit)
  for _, jobId in ipairs(jobIds) do
    removeFinishedJob(prefix, jobId, now)
  end
  for i = 1, #jobIds, 5000 do
    rcall("ZREM", targetSet, unpack(jobIds, i, math.min(i + 4999, #jobIds)))
  end
end

local function removeJobsByMaxCount(now, maxCount, targetSet, prefix)
  local jobIds = rcall("ZREVRANGE", targetSet, maxCount, -1)
  if #jobIds > 0 then
    for _, jobId in ipairs(jobIds) do
      removeFinishedJob(prefix, jobId, now)
    end
    rcall("ZREMRANGEBYRANK", targetSet, 0, -(maxCount + 1))
  end
end
