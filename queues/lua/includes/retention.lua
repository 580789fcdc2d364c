--[[
  Retention of finished jobs (wire spec 4.7 step 11): by age (seconds, at
  most `limit` per call) and by count (keep the newest `count`).
  Requires: base, remove.
]]
local function removeJobsByMaxAge(now, maxAge, targetSet, prefix, limit)
  local cutoff = now - maxAge * 1000
  local jobIds = rcall("ZREVRANGEBYSCORE", targetSet, cutoff, "-inf", "LIMIT", 0, limit)
  for _, jobId in ipairs(jobIds) do
    removeJob(prefix, jobId)
  end
  for i = 1, #jobIds, 5000 do
    rcall("ZREM", targetSet, unpack(jobIds, i, math.min(i + 4999, #jobIds)))
  end
end

local function removeJobsByMaxCount(maxCount, targetSet, prefix)
  local jobIds = rcall("ZREVRANGE", targetSet, maxCount, -1)
  if #jobIds > 0 then
    for _, jobId in ipairs(jobIds) do
      removeJob(prefix, jobId)
    end
    rcall("ZREMRANGEBYRANK", targetSet, 0, -(maxCount + 1))
  end
end
