--[[
  Lock check used by every transition out of `active` (docs/protocol.md §4.7 step 3):
  a matching lock is deleted and the stalled mark cleared; returns 0, or -6
  (held by another token), or -2 (no lock). Token "0" skips the check.
]]
local function removeLock(jobKey, stalledKey, token, jobId)
  if token ~= "0" then
    local lockKey = jobKey .. ":lock"
    local lockToken = rcall("GET", lockKey)
    if lockToken == token then
      rcall("DEL", lockKey)
      rcall("SREM", stalledKey, jobId)
    elseif lockToken then
      return -6
    else
      return -2
    end
  end
  return 0
end

-- HSET a flat field/value array if it is non-empty.
local function updateJobFields(jobKey, fields)
  if fields and #fields > 0 then
    rcall("HSET", jobKey, unpack(fields))
  end
end

-- One job out of `active` for a retry, a backoff or a give-back: it exists
-- (-1), its lock matches (removeLock), `fields` (flat, may be nil) are
-- written, and it was in `active` (-3). Returns 0 or the code.
local function leaveActive(jobKey, activeKey, stalledKey, token, jobId, fields)
  if rcall("EXISTS", jobKey) == 0 then
    return -1
  end
  local code = removeLock(jobKey, stalledKey, token, jobId)
  if code < 0 then
    return code
  end
  updateJobFields(jobKey, fields)
  if rcall("LREM", activeKey, -1, jobId) < 1 then
    return -3
  end
  return 0
end
