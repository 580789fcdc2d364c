--[[
  Which state holds a job (docs/protocol.md §4.18, getStateV2 order): completed,
  failed, delayed, prioritized (ZSCORE), then active, wait, paused (LPOS),
  then waiting-children. `stateKeys` are the eight keys in that order.
]]
local function jobState(stateKeys, jobId)
  local names = {"completed", "failed", "delayed", "prioritized"}
  for i = 1, 4 do
    if rcall("ZSCORE", stateKeys[i], jobId) then
      return names[i]
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
