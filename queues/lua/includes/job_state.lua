--[[
  Which state holds a job (docs/protocol.md §4.18, getStateV2 order): completed,
  failed, delayed, prioritized (ZSCORE), then active, wait, paused (LPOS),
  then waiting-children; a grouped job's group and `groups:delayed` before
  the lists. `stateKeys` are the eight keys in that order.
]]
local function jobState(stateKeys, jobId)
  local names = {"completed", "failed", "delayed", "prioritized"}
  for i = 1, 4 do
    if rcall("ZSCORE", stateKeys[i], jobId) then
      return names[i]
    end
  end
  -- A grouped job waits in its group's zset (docs/groups.md): O(1).
  local prefix = string.sub(stateKeys[1], 1, #stateKeys[1] - #"completed")
  -- pcall: an id may name a key of another type (docs/protocol.md §7).
  local gid = redis.pcall("HGET", prefix .. jobId, "gid")
  if type(gid) == "string" and gid ~= "" then
    if rcall("ZSCORE", prefix .. "group:" .. gid .. ":wait", jobId) then
      return "waiting"
    end
    if rcall("ZSCORE", prefix .. "groups:delayed", jobId) then
      return "delayed"
    end
  end
  if rcall("LPOS", stateKeys[5], jobId) then
    return "active"
  end
  if rcall("LPOS", stateKeys[6], jobId) or rcall("LPOS", stateKeys[7], jobId) then
    return "waiting"
  end
  if rcall("ZSCORE", stateKeys[8], jobId) then
    return "waiting-children"
  end
  return "unknown"
end
