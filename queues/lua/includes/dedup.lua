--[[
  Deduplication on add (docs/protocol.md §4.22). `de` is the decoded `opts.de`
  table {id, ttl?, extend?, replace?, keepLastIfActive?}; the owner key is
  `{prefix}de:{id}` and holds the id of the job that owns the window.
  `pending` describes the job being added, for the keepLastIfActive "next
  job" hash `dn:{id}`: {name, data, opts (JSON text), parentKey?, parent?,
  rjk?}.
  Each function returns the owner's id when the add must be dropped, or nil
  when the job is to be stored (the key then points at it). `pending` also
  carries the add's delay and timestamp, for `reschedule`.
  Requires: base, markers, scores, remove.
]]
local function setDeduplicationKey(deKey, jobId, de)
  local ttl = tonumber(de["ttl"])
  if ttl and ttl > 0 then
    rcall("SET", deKey, jobId, "PX", ttl)
  else
    rcall("SET", deKey, jobId)
  end
end

-- Owner key for a new window: keepLastIfActive windows never expire on their
-- own, since the owner may still be running when its TTL would run out.
local function claimDeduplicationKey(deKey, jobId, de)
  if de["keepLastIfActive"] then
    rcall("SET", deKey, jobId)
  else
    setDeduplicationKey(deKey, jobId, de)
  end
end

-- A key without expiry whose owner hash is gone (lost to an outage or an
-- eviction) would block the id for ever: start a new window instead.
local function recoverStaleDeduplicationKey(prefix, deKey, ownerId, jobId, de)
  if ownerId and rcall("PTTL", deKey) == -1 and rcall("EXISTS", prefix .. ownerId) == 0 then
    rcall("DEL", deKey)
    rcall("DEL", prefix .. "dn:" .. de["id"])
    claimDeduplicationKey(deKey, jobId, de)
    return true
  end
  return false
end

-- keepLastIfActive: while the owner runs, remember the newest add in
-- `dn:{id}`; move_to_finished turns it into a job when the owner finishes.
local function storeDeduplicatedNextJob(prefix, de, ownerId, jobId, pending, eventsKey,
                                        maxEvents)
  if not (de["keepLastIfActive"] and ownerId) then
    return false
  end
  if not rcall("LPOS", prefix .. "active", ownerId) then
    return false
  end
  local nextKey = prefix .. "dn:" .. de["id"]
  local fields = {"name", pending["name"], "data", pending["data"], "opts", pending["opts"],
    "jid", jobId}
  if pending["parentKey"] then
    fields[#fields + 1] = "pk"
    fields[#fields + 1] = pending["parentKey"]
    fields[#fields + 1] = "pdk"
    fields[#fields + 1] = pending["parentKey"] .. ":dependencies"
  end
  if pending["parent"] then
    fields[#fields + 1] = "pd"
    fields[#fields + 1] = pending["parent"]
  end
  if pending["rjk"] then
    fields[#fields + 1] = "rjk"
    fields[#fields + 1] = pending["rjk"]
  end
  rcall("DEL", nextKey)
  rcall("HSET", nextKey, unpack(fields))
  rcall("PERSIST", prefix .. "de:" .. de["id"])
  emitTrimmed(eventsKey, maxEvents, "event", "deduplicated", "jobId", ownerId,
    "deduplicationId", de["id"], "deduplicatedJobId", jobId)
  return true
end

local function deduplicateWithoutReplace(prefix, de, jobId, pending, eventsKey, maxEvents)
  local deKey = prefix .. "de:" .. de["id"]
  local ttl = tonumber(de["ttl"])
  local taken
  if ttl and ttl > 0 and de["extend"] then
    local ownerId = rcall("GET", deKey)
    if not ownerId then
      claimDeduplicationKey(deKey, jobId, de)
      return nil
    end
    if recoverStaleDeduplicationKey(prefix, deKey, ownerId, jobId, de) then
      return nil
    end
    if storeDeduplicatedNextJob(prefix, de, ownerId, jobId, pending, eventsKey, maxEvents) then
      return ownerId
    end
    -- extend: the window restarts at every deduplicated add.
    claimDeduplicationKey(deKey, ownerId, de)
    emitTrimmed(eventsKey, maxEvents, "event", "deduplicated", "jobId", ownerId,
      "deduplicationId", de["id"], "deduplicatedJobId", jobId)
    return ownerId
  elseif ttl and ttl > 0 and not de["keepLastIfActive"] then
    taken = not rcall("SET", deKey, jobId, "PX", ttl, "NX")
  else
    taken = not rcall("SET", deKey, jobId, "NX")
  end
  if not taken then
    return nil
  end
  local ownerId = rcall("GET", deKey)
  if recoverStaleDeduplicationKey(prefix, deKey, ownerId, jobId, de) then
    return nil
  end
  if storeDeduplicatedNextJob(prefix, de, ownerId, jobId, pending, eventsKey, maxEvents) then
    return ownerId
  end
  emitTrimmed(eventsKey, maxEvents, "event", "deduplicated", "jobId", ownerId,
    "deduplicationId", de["id"], "deduplicatedJobId", jobId)
  return ownerId
end

-- replace (debounce): an owner still in `delayed` is deleted and the new job
-- takes its place; an owner that already runs or ran keeps the window.
local function deduplicateJob(prefix, de, jobId, pending, eventsKey, maxEvents, allowReplace)
  if not allowReplace then
    return deduplicateWithoutReplace(prefix, de, jobId, pending, eventsKey, maxEvents)
  end
  if not de["replace"] then
    local ownerId = deduplicateWithoutReplace(prefix, de, jobId, pending, eventsKey, maxEvents)
    local delayedKey = prefix .. "delayed"
    -- reschedule: a still-delayed owner is pushed back by the new add's delay.
    if ownerId and de["reschedule"] and rcall("ZSCORE", delayedKey, ownerId) then
      local delay = tonumber(pending["delay"]) or 0
      rcall("HSET", prefix .. ownerId, "delay", delay)
      local score, due = getDelayedScore(delayedKey, pending["timestamp"], delay)
      rcall("ZADD", delayedKey, score, ownerId)
      emitTrimmed(eventsKey, maxEvents, "event", "delayed", "jobId", ownerId, "delay", due)
      addDelayMarkerIfNeeded(prefix .. "marker", delayedKey)
    end
    return ownerId
  end
  local deKey = prefix .. "de:" .. de["id"]
  local ownerId = rcall("GET", deKey)
  if not ownerId then
    claimDeduplicationKey(deKey, jobId, de)
    return nil
  end
  if rcall("ZREM", prefix .. "delayed", ownerId) > 0 then
    removeJobKeys(prefix .. ownerId)
    rcall("XADD", eventsKey, "*", "event", "removed", "jobId", ownerId, "prev", "delayed")
    emitTrimmed(eventsKey, maxEvents, "event", "deduplicated", "jobId", jobId,
      "deduplicationId", de["id"], "deduplicatedJobId", ownerId)
    rcall("DEL", prefix .. "dn:" .. de["id"])
    local ttl = tonumber(de["ttl"])
    if de["keepLastIfActive"] then
      rcall("SET", deKey, jobId)
    elseif ttl and ttl > 0 and not de["extend"] then
      -- The replacement inherits what is left of the window.
      rcall("SET", deKey, jobId, "KEEPTTL")
    else
      setDeduplicationKey(deKey, jobId, de)
    end
    return nil
  end
  if recoverStaleDeduplicationKey(prefix, deKey, ownerId, jobId, de) then
    return nil
  end
  storeDeduplicatedNextJob(prefix, de, ownerId, jobId, pending, eventsKey, maxEvents)
  return ownerId
end
