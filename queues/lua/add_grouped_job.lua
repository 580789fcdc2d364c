--[[
  Add a grouped job (docs/groups.md, docs/protocol.md §6.2): stored as any
  job, then given a ticket, a turn of its group in `groups:q` (and, when it
  is prioritized or lifo or its group has such jobs, put in its group's zset:
  priority, then arrival; lifo newest first), or put in `groups:delayed`
  when it has a delay. Never in `wait`, `prioritized` or `delayed`, where any BullMQ worker
  could take it out of turn. Emits `waiting` or `delayed` as an add does.

  KEYS[1] meta
  KEYS[2] id
  KEYS[3] events
  KEYS[4] marker
  KEYS[5] groups:meta

  ARGV[1] key prefix
  ARGV[2] JSON job arguments (see includes/store.lua), with `gid` and `lifo`
  ARGV[3] data JSON

  Returns the job id (the existing one for a duplicate custom id, the owner's
  for a deduplicated add), or -5 (flow parent missing) or -7 (the existing
  job belongs to another live parent).
]]
--- @include "base"
--- @include "markers"
--- @include "scores"
--- @include "remove"
--- @include "dedup"
--- @include "store"
--- @include "groups"

local prefix = ARGV[1]
local args = cjson.decode(ARGV[2])
local jobId, duplicate, maxEvents = storeJob(prefix, KEYS[2], KEYS[1], KEYS[3], args, ARGV[3])
if duplicate then
  return jobId
end
local gid = args["gid"]
local jobKey = prefix .. jobId
local delay = tonumber(args["delay"]) or 0
if delay > 0 then
  local due = tonumber(args["timestamp"]) + delay
  delayGrouped(prefix, jobKey, jobId, gid, due)
  emitTrimmed(KEYS[3], maxEvents, "event", "delayed", "jobId", jobId, "delay", due)
else
  enqueueGrouped(prefix, jobKey, jobId, gid, tonumber(args["priority"]) or 0,
    args["lifo"], false, true)
  emitTrimmed(KEYS[3], maxEvents, "event", "waiting", "jobId", jobId)
end
addToParentDependencies(args, prefix, jobId)
return jobId
