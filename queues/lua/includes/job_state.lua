--[[
  Which state holds a job (docs/protocol.md §4.18): completed, failed,
  delayed, prioritized (ZSCORE), a grouped job's group and `groups:delayed`,
  active (LPOS: a short list), wait and paused looked at near both ends
  only, waiting-children (ZSCORE), then, in a backlog longer than that look,
  a job whose hash exists is waiting: the read stays O(1) however long the
  backlog. `stateKeys` are the eight keys in getStateV2's order.
]]
--- How far into `wait` from either end the state read looks for a job.
local STATE_SCAN = 1000

local function jobState(stateKeys, jobId)
  local names = {"completed", "failed", "delayed", "prioritized"}
  for i = 1, 4 do
    if rcall("ZSCORE", stateKeys[i], jobId) then
      return names[i]
    end
  end
  -- A grouped job waits while its ticket is in `groups:q` or parked
  -- (docs/groups.md): O(1).
  local prefix = string.sub(stateKeys[1], 1, #stateKeys[1] - #"completed")
  -- pcall: an id may name a key of another type (docs/protocol.md §7).
  local grouped = redis.pcall("HMGET", prefix .. jobId, "gid", "gsq")
  local gid = type(grouped) == "table" and grouped[1]
  if type(gid) == "string" and gid ~= "" then
    local ticket = ticketOf(gid, jobId, grouped[2])
    if ticket and (rcall("ZSCORE", prefix .. "groups:q", ticket) or
        rcall("ZSCORE", prefix .. "group:" .. gid .. ":parked", ticket)) then
      return "waiting"
    end
    if rcall("ZSCORE", prefix .. "groups:delayed", jobId) then
      return "delayed"
    end
  end
  if rcall("LPOS", stateKeys[5], jobId) then
    return "active"
  end
  -- `wait` (and v5's `paused`) can hold millions: look near both ends only.
  -- A job that is in no other state and whose hash exists is waiting where
  -- that look could not cover the whole list (BullMQ scans it all).
  for i = 6, 7 do
    if rcall("LPOS", stateKeys[i], jobId, "MAXLEN", STATE_SCAN) or
       rcall("LPOS", stateKeys[i], jobId, "RANK", -1, "MAXLEN", STATE_SCAN) then
      return "waiting"
    end
  end
  if rcall("ZSCORE", stateKeys[8], jobId) then
    return "waiting-children"
  end
  for i = 6, 7 do
    if rcall("LLEN", stateKeys[i]) > 2 * STATE_SCAN then
      if rcall("EXISTS", prefix .. jobId) == 1 then
        return "waiting"
      end
      break
    end
  end
  return "unknown"
end
