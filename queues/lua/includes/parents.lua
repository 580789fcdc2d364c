--[[
  Flow bookkeeping when a child finishes (docs/protocol.md §4.7 step 9) or is
  retried, and deduplication-key cleanup (step 8). A parent lives in its own queue, whose
  keys are derived from the `parent` JSON ({id, queueKey, fpof?, cpof?,
  idof?, rdof?}) or from `parentKey`.
  Requires: base, markers, metadata, scores.
]]
-- `deid`: the finished job's deduplication id (nil or false: none).
local function removeDeduplicationKeyOnFinish(prefix, deid, jobId)
  if deid then
    local deKey = prefix .. "de:" .. deid
    local pttl = rcall("PTTL", deKey)
    if pttl == 0 or (pttl == -1 and rcall("GET", deKey) == jobId) then
      rcall("DEL", deKey)
    end
  end
end

-- Release a parent from waiting-children to delayed, wait or prioritized,
-- by its own delay and priority.
local function moveParentToWait(parentQueueKey, parentKey, parentId, now)
  local eventsKey = parentQueueKey .. ":events"
  local markerKey = parentQueueKey .. ":marker"
  local attrs = rcall("HMGET", parentKey, "priority", "delay")
  local priority = tonumber(attrs[1]) or 0
  local delay = tonumber(attrs[2]) or 0
  if delay > 0 then
    local due = now + delay
    local delayedKey = parentQueueKey .. ":delayed"
    rcall("ZADD", delayedKey, due * 0x1000, parentId)
    rcall("XADD", eventsKey, "*", "event", "delayed", "jobId", parentId, "delay", due)
    addDelayMarkerIfNeeded(markerKey, delayedKey)
    return
  end
  local isPausedOrMaxed = isQueuePausedOrMaxed(parentQueueKey .. ":meta",
    parentQueueKey .. ":active")
  if priority == 0 then
    rcall("RPUSH", parentQueueKey .. ":wait", parentId)
  else
    addJobWithPriority(parentQueueKey .. ":prioritized", priority, parentId,
      parentQueueKey .. ":pc", false)
  end
  addBaseMarkerIfNeeded(markerKey, isPausedOrMaxed)
  rcall("XADD", eventsKey, "*", "event", "waiting", "jobId", parentId,
    "prev", "waiting-children")
end

local function releaseParentIfReady(parentQueueKey, parentKey, parentId, now, force)
  local waitingChildrenKey = parentQueueKey .. ":waiting-children"
  if (force or rcall("SCARD", parentKey .. ":dependencies") == 0) and
     rcall("ZSCORE", waitingChildrenKey, parentId) then
    rcall("ZREM", waitingChildrenKey, parentId)
    moveParentToWait(parentQueueKey, parentKey, parentId, now)
  end
end

-- fpof: a parent still waiting (for children, or delayed) is released with
-- `defa`, so the next worker fails it; one already past that point only gets
-- `defa` unless it has failed already.
local function failParentOfChild(parentQueueKey, parentKey, parentId, childKey, now)
  if rcall("EXISTS", parentKey) == 0 then
    return
  end
  local reason = "child " .. childKey .. " failed"
  local from
  if rcall("ZSCORE", parentQueueKey .. ":waiting-children", parentId) then
    from = parentQueueKey .. ":waiting-children"
  elseif rcall("ZSCORE", parentQueueKey .. ":delayed", parentId) then
    from = parentQueueKey .. ":delayed"
    rcall("HSET", parentKey, "delay", 0)
  end
  if from then
    rcall("ZREM", from, parentId)
    rcall("HSET", parentKey, "defa", reason)
    moveParentToWait(parentQueueKey, parentKey, parentId, now)
  elseif not rcall("ZSCORE", parentQueueKey .. ":failed", parentId) then
    rcall("HSET", parentKey, "defa", reason)
  end
end

-- `attrs`: the child's parentKey and parent fields.
local function onChildFinished(prefix, jobKey, target, value, now, attrs)
  local parentKey = attrs[1]
  local parent = {}
  if attrs[2] then
    parent = cjson.decode(attrs[2])
  end
  if not parentKey and parent["queueKey"] then
    parentKey = parent["queueKey"] .. ":" .. parent["id"]
  end
  if not parentKey then
    return
  end
  local parentId = parent["id"]
  local parentQueueKey = parent["queueKey"]
  if not parentId then
    parentId = string.match(parentKey, ".*:(.*)$")
    parentQueueKey = string.sub(parentKey, 1, #parentKey - #parentId - 1)
  end
  local depsKey = parentKey .. ":dependencies"
  if target == "completed" then
    if rcall("SREM", depsKey, jobKey) == 1 then
      rcall("HSET", parentKey .. ":processed", jobKey, value)
      releaseParentIfReady(parentQueueKey, parentKey, parentId, now, false)
    end
    return
  end
  if parent["fpof"] then
    if rcall("SREM", depsKey, jobKey) == 1 then
      rcall("ZADD", parentKey .. ":unsuccessful", now, jobKey)
      failParentOfChild(parentQueueKey, parentKey, parentId, jobKey, now)
    end
  elseif parent["cpof"] then
    if rcall("SREM", depsKey, jobKey) == 1 then
      rcall("HSET", parentKey .. ":failed", jobKey, value)
      releaseParentIfReady(parentQueueKey, parentKey, parentId, now, true)
    end
  elseif parent["idof"] or parent["rdof"] then
    if rcall("SREM", depsKey, jobKey) == 1 then
      if parent["idof"] then
        rcall("HSET", parentKey .. ":failed", jobKey, value)
      end
      releaseParentIfReady(parentQueueKey, parentKey, parentId, now, false)
    end
  end
end

-- A retried child becomes a pending dependency of its parent again when the
-- parent recorded its outcome (processed value, ignored failure or fpof
-- failure); one the parent dropped (rdof) stays dropped, and a parent that
-- already left waiting-children stays where it is, as in BullMQ 6.7.0.
local function restoreChildDependency(jobKey, prevState)
  local parentKey = rcall("HGET", jobKey, "parentKey")
  if not parentKey or rcall("EXISTS", parentKey) == 0 then
    return
  end
  local recorded
  if prevState == "failed" then
    recorded = rcall("ZREM", parentKey .. ":unsuccessful", jobKey) == 1 or
      rcall("HDEL", parentKey .. ":failed", jobKey) == 1
  else
    recorded = rcall("HDEL", parentKey .. ":processed", jobKey) == 1
  end
  if recorded then
    rcall("SADD", parentKey .. ":dependencies", jobKey)
  end
end
