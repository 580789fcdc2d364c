--[[
  How long the queue's rate limit holds claims still (docs/protocol.md §4.21),
  as BullMQ 6.7.0's getRateLimitTtl: with `maxJobs` (ARGV[1], "0" for none)
  or else the queue's global `max`, the limiter's PTTL once its count has
  reached that many (0 while under it, or when it has no expiry left; a
  limiter at PTTL 0 is deleted); with neither, the limiter's PTTL as it is
  (-2: no limiter, -1: one without an expiry).

  KEYS[1] limiter
  KEYS[2] meta

  ARGV[1] maxJobs ("0": none given)
]]
--- @include "base"
--- @include "metadata"

local maxJobs = tonumber(ARGV[1]) or 0
if maxJobs > 0 then
  return rateLimitTtl(maxJobs, KEYS[1])
end
local metaMax = tonumber(rcall("HGET", KEYS[2], "max"))
if metaMax then
  return rateLimitTtl(metaMax, KEYS[1])
end
return rcall("PTTL", KEYS[1])
