--[[
  The part every add shares (wire spec 4.1 steps 2-5): INCR the id counter,
  handle a custom id that already exists (emit `duplicated`, return it), store
  the hash and emit `added`.
  `args` is the decoded JSON argument: {id?, name, opts (JSON text),
  timestamp, delay, priority, parentKey?, parent?, rjk?, deid?}; `data` is
  the payload's JSON text, passed as its own ARGV so it is not escaped twice.
  Returns jobId, isDuplicate.
  Requires: base.
]]
local function storeJob(prefix, idKey, metaKey, eventsKey, args, data)
  local counter = rcall("INCR", idKey)
  local maxEvents = getOrSetMaxEvents(metaKey)
  local jobId = args["id"]
  if jobId == nil or jobId == "" then
    jobId = tostring(counter)
  elseif rcall("EXISTS", prefix .. jobId) == 1 then
    emitTrimmed(eventsKey, maxEvents, "event", "duplicated", "jobId", jobId)
    return jobId, true, maxEvents
  end
  local jobKey = prefix .. jobId
  local fields = {"name", args["name"], "data", data, "opts", args["opts"],
    "timestamp", args["timestamp"], "delay", args["delay"], "priority", args["priority"]}
  for _, f in ipairs({"parentKey", "parent", "rjk", "deid"}) do
    if args[f] then
      fields[#fields + 1] = f
      fields[#fields + 1] = args[f]
    end
  end
  rcall("HSET", jobKey, unpack(fields))
  rcall("XADD", eventsKey, "*", "event", "added", "jobId", jobId, "name", args["name"])
  return jobId, false, maxEvents
end

-- Record a flow child in its parent's pending dependencies.
local function addToParentDependencies(args, prefix, jobId)
  if args["parentKey"] then
    rcall("SADD", args["parentKey"] .. ":dependencies", prefix .. jobId)
  end
end
