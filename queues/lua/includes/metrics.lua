--[[
  Per-minute counts of finished jobs (docs/protocol.md §1.2 `metrics:*`, 4.7 step 13),
  kept in the same layout as BullMQ's workers write them, so either client can
  add to and read the same series.

  `metrics:{target}` HASH: `count` (all finished jobs), `prevTS` (the time the
  open minute was last closed), `prevCount` (`count` at that time).
  `metrics:{target}:data` LIST: one count per past minute, newest at the head.
  Requires: base.
]]

-- Redis scripts can pass only a few thousand arguments to one command.
local METRICS_PUSH_CHUNK = 5000

-- Record one finished job at `now` (ms). The job counts towards the minute of
-- `now`: a point for an earlier minute is written only once a later finish
-- sees that minute has passed.
local function collectMetrics(metricsKey, dataKey, maxDataPoints, now)
  local before = rcall("HINCRBY", metricsKey, "count", 1) - 1
  local prevTS = rcall("HGET", metricsKey, "prevTS")
  if not prevTS then
    rcall("HSET", metricsKey, "prevTS", now, "prevCount", 0)
    return
  end
  local elapsed = math.floor(now / 60000) - math.floor(tonumber(prevTS) / 60000)
  local points = math.min(elapsed, maxDataPoints)
  if points <= 0 then
    return
  end
  -- The minute that just closed holds everything finished since prevCount;
  -- each minute skipped after it held nothing. The skipped ones go nearer the
  -- head, as they are more recent.
  local closed = before - tonumber(rcall("HGET", metricsKey, "prevCount") or 0)
  rcall("LPUSH", dataKey, closed)
  local zeros = points - 1
  while zeros > 0 do
    local chunk = {}
    for i = 1, math.min(zeros, METRICS_PUSH_CHUNK) do
      chunk[i] = 0
    end
    rcall("LPUSH", dataKey, unpack(chunk))
    zeros = zeros - #chunk
  end
  rcall("LTRIM", dataKey, 0, maxDataPoints - 1)
  rcall("HSET", metricsKey, "prevCount", before, "prevTS", now)
end
