--[[
  The part every add shares (docs/protocol.md §4.1 steps 1-5): check a flow parent
  exists, INCR the id counter, handle a custom id that already exists (emit
  `duplicated`, attach it to the new parent, return it), deduplicate, store
  the hash and emit `added`.
  `args` is the decoded JSON argument: {id?, name, opts (JSON text),
  timestamp, delay, priority, parentKey?, parent? (JSON text), rjk?, deid?,
  de? (the opts.de table), flow? (true inside a FlowProducer transaction),
  gid? (a grouped add's group, stored in the hash)};
  `data` is the payload's JSON text, passed as its own ARGV so it is not
  escaped twice.
  Returns jobId, isDuplicate, maxEvents. jobId is -5 (parent missing) or -7
  (the existing job belongs to another live parent) on those errors; a
  deduplicated add returns the owner's id as a duplicate.
  Requires: base, markers, scores, remove, dedup.
]]

-- HSET the job hash and emit `added` (no MAXLEN, as BullMQ).
local function writeJobHash(jobKey, jobId, args, data, eventsKey)
  local fields = {"name", args["name"], "data", data, "opts", args["opts"],
    "timestamp", args["timestamp"], "delay", args["delay"], "priority", args["priority"]}
  for _, f in ipairs({"parentKey", "parent", "rjk", "deid", "gid"}) do
    if args[f] then
      fields[#fields + 1] = f
      fields[#fields + 1] = args[f]
    end
  end
  rcall("HSET", jobKey, unpack(fields))
  rcall("XADD", eventsKey, "*", "event", "added", "jobId", jobId, "name", args["name"])
end

-- An add whose custom id exists: link the existing job to the new parent
-- unless another live parent owns it. A child that already completed counts
-- as processed at once; releasing the parent is left to release_parent,
-- which a flow runs after all its nodes are in.
local function handleDuplicatedJob(prefix, jobId, args, eventsKey, maxEvents)
  local jobKey = prefix .. jobId
  local parentKey = args["parentKey"]
  local existingParent = rcall("HGET", jobKey, "parentKey")
  if existingParent and parentKey and existingParent ~= parentKey and
     rcall("EXISTS", existingParent) == 1 then
    if args["flow"] then
      rcall("HSET", parentKey, "flowAttachmentFailed", "1")
    end
    return -7
  end
  if parentKey then
    if rcall("ZSCORE", prefix .. "completed", jobId) then
      rcall("HSET", parentKey .. ":processed", jobKey, rcall("HGET", jobKey, "returnvalue"))
    else
      rcall("SADD", parentKey .. ":dependencies", jobKey)
    end
    rcall("HSET", jobKey, "parentKey", parentKey, "parent", args["parent"])
  end
  emitTrimmed(eventsKey, maxEvents, "event", "duplicated", "jobId", jobId)
  return jobId
end

local function storeJob(prefix, idKey, metaKey, eventsKey, args, data, noReplace)
  if args["parentKey"] and rcall("EXISTS", args["parentKey"]) == 0 then
    return -5, true, nil
  end
  local counter = rcall("INCR", idKey)
  local maxEvents = getOrSetMaxEvents(metaKey)
  local jobId = args["id"]
  if jobId == nil or jobId == "" then
    jobId = intText(counter)
  elseif rcall("EXISTS", prefix .. jobId) == 1 then
    return handleDuplicatedJob(prefix, jobId, args, eventsKey, maxEvents), true, maxEvents
  end
  local de = args["de"]
  if de and de["id"] then
    local pending = {name = args["name"], data = data, opts = args["opts"],
      parentKey = args["parentKey"], parent = args["parent"], rjk = args["rjk"],
      delay = args["delay"], timestamp = args["timestamp"]}
    local ownerId = deduplicateJob(prefix, de, jobId, pending, eventsKey, maxEvents,
      not noReplace)
    if ownerId then
      return ownerId, true, maxEvents
    end
  end
  writeJobHash(prefix .. jobId, jobId, args, data, eventsKey)
  return jobId, false, maxEvents
end

-- Record a flow child in its parent's pending dependencies.
local function addToParentDependencies(args, prefix, jobId)
  if args["parentKey"] then
    rcall("SADD", args["parentKey"] .. ":dependencies", prefix .. jobId)
  end
end
