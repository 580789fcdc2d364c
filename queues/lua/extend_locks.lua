--[[
  Renew the locks of all of a worker's active jobs in one call
  (docs/protocol.md §4.6, batched form): for each (id, token) whose lock still holds the token,
  SET it again with PX duration and SREM the id from `stalled`. A grouped
  job's lock has no expiry: it renews the lease of its worker (the token
  less its last `:` part) in `groups:leases` instead, once per worker.

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
-- Only a queue whose workers took grouped jobs has leases to renew.
local leased = rcall("EXISTS", leasesKey) == 1
local renewed = {}

for i, jobId in ipairs(ids) do
  local lockKey = ARGV[1] .. jobId .. ":lock"
  local token = tokens[i]
  if rcall("GET", lockKey) == token then
    if leased and rcall("PTTL", lockKey) == -1 then
      -- A grouped job's lock never expires; its worker's lease does (docs/groups.md).
      local owner = string.match(token, "^(.*):[^:]*$")
      if owner and not renewed[owner] then
        renewed[owner] = true
        rcall("ZADD", leasesKey, serverTimeMs() + tonumber(ARGV[2]), owner)
      end
    else
      rcall("SET", lockKey, token, "PX", ARGV[2])
    end
    rcall("SREM", KEYS[1], jobId)
  else
    failed[#failed + 1] = jobId
  end
end
return failed
