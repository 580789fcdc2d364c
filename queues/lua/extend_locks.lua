--[[
  Renew the locks of all of a worker's active jobs in one call
  (docs/protocol.md §4.6, batched form): for each (id, token) whose lock still holds the token,
  SET it again with PX duration (a grouped job: renew its lease) and SREM the id
  from `stalled`.

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
local leasesKey = ARGV[1] .. "groups:leases"
-- Only a queue with grouped jobs running has leases to look at.
local leased = rcall("EXISTS", leasesKey) == 1
local now

for i, jobId in ipairs(ids) do
  local lockKey = ARGV[1] .. jobId .. ":lock"
  if rcall("GET", lockKey) == tokens[i] then
    if leased and rcall("ZSCORE", leasesKey, jobId) then
      now = now or serverTimeMs()
      -- A grouped job's lock never expires; its lease does (docs/groups.md).
      rcall("ZADD", leasesKey, "XX", now + tonumber(ARGV[2]), jobId)
    else
      rcall("SET", lockKey, tokens[i], "PX", ARGV[2])
    end
    rcall("SREM", KEYS[1], jobId)
  else
    failed[#failed + 1] = jobId
  end
end
return failed
