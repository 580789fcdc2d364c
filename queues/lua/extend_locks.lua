--[[
  Renew the locks of all of a worker's active jobs in one call
  (docs/protocol.md §4.6, batched form): for each (id, token) whose lock still holds the token,
  SET it again with PX duration and SREM the id from `stalled`.

  KEYS[1] stalled

  ARGV[1] key prefix
  ARGV[2] lock duration (ms)
  ARGV[3] JSON array of job ids
  ARGV[4] JSON array of lock tokens (same order)

  Returns the ids whose lock could not be renewed.
]]
--- @include "base"

local ids = cjson.decode(ARGV[3])
local tokens = cjson.decode(ARGV[4])
local failed = {}
for i, jobId in ipairs(ids) do
  local lockKey = ARGV[1] .. jobId .. ":lock"
  if rcall("GET", lockKey) == tokens[i] then
    rcall("SET", lockKey, tokens[i], "PX", ARGV[2])
    rcall("SREM", KEYS[1], jobId)
  else
    failed[#failed + 1] = jobId
  end
end
return failed
