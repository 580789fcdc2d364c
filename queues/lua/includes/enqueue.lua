--[[
  Put a job whose hash is already stored where its delay, priority and lifo
  send it, with the event an add emits: `delayed {delay=<due ms>}` plus the
  delay marker, or `waiting` plus the base marker unless the queue is paused
  or maxed. Used for jobs created inside other transitions (scheduler
  iterations, a deduplicated "next job"). All keys derive from `prefix`.
  Requires: base, markers, metadata, scores.
]]
local function enqueueStoredJob(prefix, jobId, delay, priority, lifo, timestamp, maxEvents)
  local eventsKey = prefix .. "events"
  local markerKey = prefix .. "marker"
  if delay > 0 then
    local delayedKey = prefix .. "delayed"
    local score, due = getDelayedScore(delayedKey, timestamp, delay)
    rcall("ZADD", delayedKey, score, jobId)
    emitTrimmed(eventsKey, maxEvents, "event", "delayed", "jobId", jobId, "delay", due)
    addDelayMarkerIfNeeded(markerKey, delayedKey)
    return
  end
  local isPausedOrMaxed = isQueuePausedOrMaxed(prefix .. "meta", prefix .. "active")
  if priority > 0 then
    addJobWithPriority(prefix .. "prioritized", priority, jobId, prefix .. "pc", false)
  elseif lifo then
    rcall("RPUSH", prefix .. "wait", jobId)
  else
    rcall("LPUSH", prefix .. "wait", jobId)
  end
  addBaseMarkerIfNeeded(markerKey, isPausedOrMaxed)
  emitTrimmed(eventsKey, maxEvents, "event", "waiting", "jobId", jobId)
end

-- The opts JSON of a job as a table, tolerating text another client broke.
local function decodeOpts(optsJson)
  local ok, opts = pcall(cjson.decode, optsJson or "{}")
  if ok and type(opts) == "table" then
    return opts
  end
  return {}
end
