--[[
  Count jobs per state (docs/protocol.md §4.18): LLEN for lists (a legacy "0:" tail
  marker of wait/paused is discounted and popped, as BullMQ's getCounts
  does), ZCARD for sorted sets.

  KEYS[i] the key of each requested state

  ARGV[i] the state name of KEYS[i] (wait, paused, active, or a set name;
          "pk": KEYS[i] is `groups:meta`, whose field `pk` counts the
          groups' parked tickets, docs/groups.md)

  Returns one count per key.
]]
--- @include "base"

local counts = {}
for i, key in ipairs(KEYS) do
  local state = ARGV[i]
  if state == "wait" or state == "paused" or state == "active" then
    local n = rcall("LLEN", key)
    if n > 0 and state ~= "active" then
      local tail = rcall("LINDEX", key, -1)
      if tail and string.sub(tail, 1, 2) == "0:" then
        if n > 1 then
          rcall("RPOP", key)
        end
        n = n - 1
      end
    end
    counts[i] = n
  elseif state == "pk" then
    counts[i] = math.max(tonumber(rcall("HGET", key, "pk")) or 0, 0)
  else
    counts[i] = rcall("ZCARD", key)
  end
end
return counts
