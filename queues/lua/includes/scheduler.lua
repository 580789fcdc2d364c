--[[
  Job schedulers (docs/protocol.md §1.2, 1.4): `repeat` ZSET (member = scheduler id,
  score = millis of its current iteration), `repeat:{id}` hash (name, tz,
  limit, pattern, startDate, endDate, every, offset, opts, data, ic), and
  iteration jobs `repeat:{id}:{millis}` carrying `rjk = id`.
  Requires: base, markers, metadata, scores, remove, dedup, store, enqueue.
]]

-- Next run of an `every` scheduler: the first run is now (or startDate, or
-- the next slot that keeps a given offset); later runs follow the previous
-- one by `every`, skipping to the next aligned slot when runs were missed.
-- Returns nextMillis and the phase (offset) within the interval.
local function everyNextMillis(prevMillis, every, now, offset, startDate)
  offset = tonumber(offset)
  local nextMillis
  if not prevMillis then
    if startDate then
      nextMillis = math.max(tonumber(startDate), now)
    elseif offset and offset > 0 then
      nextMillis = math.floor(now / every) * every + offset
      if nextMillis <= now then
        nextMillis = nextMillis + every
      end
    else
      nextMillis = now
    end
  else
    nextMillis = prevMillis + every
    if nextMillis < now then
      local aligned = math.floor(now / every) * every + (offset or 0)
      if aligned <= now then
        aligned = aligned + every
      end
      nextMillis = aligned
    end
  end
  if not offset or offset == 0 then
    offset = nextMillis - math.floor(nextMillis / every) * every
  end
  return math.floor(nextMillis), math.floor(offset)
end

local function iterationJobId(schedulerId, millis)
  return "repeat:" .. schedulerId .. ":" .. millis
end

-- Rewrite the scheduler hash from `spec` (keeping its iteration count and,
-- when the spec has none, its offset) and score it at nextMillis.
local function storeScheduler(repeatKey, schedulerId, nextMillis, spec, templateData)
  local schedulerKey = repeatKey .. ":" .. schedulerId
  rcall("ZADD", repeatKey, nextMillis, schedulerId)
  local fields = {"name", spec["name"]}
  for _, f in ipairs({"tz", "limit", "pattern", "startDate", "endDate", "every"}) do
    if spec[f] then
      fields[#fields + 1] = f
      fields[#fields + 1] = spec[f]
    end
  end
  local offset = spec["offset"] or rcall("HGET", schedulerKey, "offset")
  if offset then
    fields[#fields + 1] = "offset"
    fields[#fields + 1] = offset
  end
  local templateOpts = spec["templateOpts"]
  if templateOpts and templateOpts ~= "{}" then
    fields[#fields + 1] = "opts"
    fields[#fields + 1] = templateOpts
  end
  if templateData and templateData ~= "{}" then
    fields[#fields + 1] = "data"
    fields[#fields + 1] = templateData
  end
  fields[#fields + 1] = "ic"
  fields[#fields + 1] = rcall("HGET", schedulerKey, "ic") or 1
  rcall("DEL", schedulerKey)
  rcall("HSET", schedulerKey, unpack(fields))
end

-- Store and enqueue one iteration; `opts` is the decoded opts table, given
-- its `delay` and `jobId` here.
local function addIterationJob(prefix, schedulerId, jobId, name, data, opts, delay, now,
                               maxEvents)
  opts["delay"] = delay
  opts["jobId"] = jobId
  local priority = tonumber(opts["priority"]) or 0
  local args = {name = name, opts = cjson.encode(opts), timestamp = now, delay = delay,
    priority = priority, rjk = schedulerId}
  writeJobHash(prefix .. jobId, jobId, args, data, prefix .. "events")
  enqueueStoredJob(prefix, jobId, delay, priority, opts["lifo"] == true, now, maxEvents)
end
