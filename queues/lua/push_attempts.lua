--[[
  Keep the records of attempts that ended outside move_to_finished (a retry
  or a give-back, saved or refused): see includes/attempts.lua. The lists are outside every
  queue's keys (BullMQ never reads them); on a cluster they share the
  queue's slot through its prefix's hash tag (`bullpen:attempts:{bull}:q:1`).

  KEYS[i] the attempt history of the i-th record

  ARGV[1] JSON {keep, ttl, intended}: how many records a list keeps, for
          how long (s), and the outcome the workers intended
  ARGV[2] JSON array of the codes Redis answered their ends with (0 saved)
  ARGV[2 + i] the i-th record (as move_to_finished takes it)

  Returns the number of records pushed.
]]
--- @include "base"
--- @include "attempts"

local settings = cjson.decode(ARGV[1])
local codes = cjson.decode(ARGV[2])
local keep = tonumber(settings["keep"])
local ttlText = intText(tonumber(settings["ttl"]))
for i, key in ipairs(KEYS) do
  pushAttempt(key, ARGV[2 + i], settings["intended"], tonumber(codes[i]), keep, ttlText)
end
return #KEYS
