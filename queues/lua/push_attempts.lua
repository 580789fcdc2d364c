--[[
  Keep the records of attempts that ended outside move_to_finished (a retry
  saved or refused): see includes/attempts.lua. The lists are outside every
  queue's keys (BullMQ never reads them); on a cluster they share the
  queue's slot through its prefix's hash tag (`bullpen:attempts:{bull}:q:1`).

  KEYS[i] the attempt history of the i-th record (for routing; the records
          name their keys too)

  ARGV[1] JSON array of attempts {key, keep, ttl, intended, record}
  ARGV[2] JSON array of the codes Redis answered their ends with (0 saved)

  Returns the number of records pushed.
]]
--- @include "base"
--- @include "attempts"

local attempts = cjson.decode(ARGV[1])
local codes = cjson.decode(ARGV[2])
for i, attempt in ipairs(attempts) do
  pushAttempt(attempt, tonumber(codes[i]))
end
return #attempts
