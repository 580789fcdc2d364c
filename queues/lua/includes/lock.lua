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
