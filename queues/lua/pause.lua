--[[
  Pause or resume a queue with BullMQ 6 semantics (docs/protocol.md §4.15). Pause:
  HSET meta paused 1, DEL marker, emit `paused`; jobs stay in `wait`. Resume:
  HDEL meta paused, migrate a legacy v5 `paused` list into `wait` (RENAME
  when `wait` is absent, else chunks of 7000 per call), re-add the marker,
  emit `resumed`.

  KEYS[1] wait
  KEYS[2] paused (legacy list)
  KEYS[3] meta
  KEYS[4] prioritized
  KEYS[5] events
  KEYS[6] delayed
  KEYS[7] marker

  ARGV[1] "paused" or "resumed"
  ARGV[2] "1" to emit the event (off on the follow-up calls of a resume)

  Returns the number of legacy ids still to migrate (0 when done).
]]
--- @include "base"
--- @include "markers"

if ARGV[1] == "paused" then
  rcall("HSET", KEYS[3], "paused", 1)
  metaRead[KEYS[3]] = nil
  rcall("DEL", KEYS[7])
  if ARGV[2] == "1" then
    rcall("XADD", KEYS[5], "*", "event", "paused")
  end
  return 0
end

rcall("HDEL", KEYS[3], "paused")
metaRead[KEYS[3]] = nil
local remaining = 0
if rcall("EXISTS", KEYS[2]) == 1 then
  if rcall("EXISTS", KEYS[1]) == 0 then
    rcall("RENAME", KEYS[2], KEYS[1])
  else
    -- Legacy jobs are older than any added since: append them at wait's
    -- tail (the end workers pop from), keeping their order.
    local chunk = rcall("LRANGE", KEYS[2], 0, 6999)
    rcall("RPUSH", KEYS[1], unpack(chunk))
    rcall("LTRIM", KEYS[2], #chunk, -1)
    remaining = rcall("LLEN", KEYS[2])
  end
end
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #"wait")
if rcall("LLEN", KEYS[1]) > 0 or rcall("ZCARD", KEYS[4]) > 0 or
   rcall("EXISTS", prefix .. "groups:q") > 0 or
   rcall("ZCARD", prefix .. "groups:delayed") > 0 or
   rcall("ZCARD", prefix .. "groups:timed") > 0 then
  -- Grouped jobs too (docs/groups.md): a woken worker finds their next time.
  rcall("ZADD", KEYS[7], 0, "0")
else
  addDelayMarkerIfNeeded(KEYS[7], KEYS[6])
end
if ARGV[2] == "1" then
  rcall("XADD", KEYS[5], "*", "event", "resumed")
end
return remaining
