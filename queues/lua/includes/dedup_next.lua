--[[
  keepLastIfActive (docs/protocol.md §4.7 step 8): when the owner of a
  deduplication window finishes, the newest add it absorbed while active,
  kept in `dn:{id}`, becomes a job: the id counter is INCRed, the stored
  `jid` is its id, it owns the window and is enqueued like a fresh add.
  Requires: base, markers, metadata, scores, remove, dedup, store, enqueue.
]]
local function requeueDeduplicatedJob(prefix, deid, now, maxEvents)
  local nextKey = prefix .. "dn:" .. deid
  if rcall("EXISTS", nextKey) == 0 then
    return
  end
  local f = rcall("HMGET", nextKey, "name", "data", "opts", "pk", "pd", "rjk", "jid")
  local counter = rcall("INCR", prefix .. "id")
  local jobId = f[7] or intText(counter)
  local opts = decodeOpts(f[3])
  local de = opts["de"]
  if type(de) == "table" then
    claimDeduplicationKey(prefix .. "de:" .. deid, jobId, de)
  end
  local delay = tonumber(opts["delay"]) or 0
  local priority = tonumber(opts["priority"]) or 0
  local args = {name = f[1], opts = f[3] or "{}", timestamp = now, delay = delay,
    priority = priority, parentKey = f[4], parent = f[5], rjk = f[6], deid = deid}
  writeJobHash(prefix .. jobId, jobId, args, f[2] or "{}", prefix .. "events")
  enqueueStoredJob(prefix, jobId, delay, priority, opts["lifo"] == true, now, maxEvents)
  if f[4] then
    rcall("SADD", f[4] .. ":dependencies", prefix .. jobId)
  end
  rcall("DEL", nextKey)
end
