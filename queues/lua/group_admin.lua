--[[
  Change one group, or the defaults of every group (docs/groups.md):
  `set` its own settings (weight, concurrency, max, duration; JSON null
  clears one, so the default applies), `defaults` (the same fields in
  `groups:meta`), `pause`, `resume`, `hold` {reason, until?, info?} and
  `release` {reason?} (only that hold when a reason is given). Whatever may
  let the group run again gives its parked tickets turns (as many as it may
  run now); a limit that starts to apply counts the jobs already running; a
  weight set gives the group's queued tickets turns at that weight (a
  default weight: of every group without one of its own), 1,000 tickets a
  call: `retag` goes on with the rest.

  KEYS[1] groups:meta (every other key derives from the prefix)

  ARGV[1] key prefix
  ARGV[2] action
  ARGV[3] group id ("" for `defaults`)
  ARGV[4] JSON arguments

  Returns 1, or 0 when `release` named a hold the group does not have, or
  2 when a weight's re-turn has tickets left (call `retag` until it is 1).
]]
--- @include "base"
--- @include "markers"
--- @include "groups"
--- @include "retag"

local prefix, action, gid = ARGV[1], ARGV[2], ARGV[3]
local args = cjson.decode(ARGV[4])
local metaKey = prefix .. "groups:meta"
local function applySettings(key)
  for _, field in ipairs(GROUP_LIMITS) do
    local value = args[field]
    if value == cjson.null then
      rcall("HDEL", key, field)
    elseif value ~= nil then
      rcall("HSET", key, field, value)
    end
  end
end

if action == "retag" then
  return retagGroups(prefix, RETAG_CHUNK) and 2 or 1
end
if action == "defaults" then
  rcall("HSETNX", metaKey, "seq", 0)
  applySettings(metaKey)
  local more = false
  if args["weight"] ~= nil then
    -- Groups with tickets queued that take the default weight.
    more = retagLater(prefix, nil)
  end
  -- A limit that starts to apply counts the jobs already running.
  recountRunning(prefix, nil)
  for _, g in ipairs(rcall("SRANDMEMBER", prefix .. "groups:parked", GROUP_STEP_LIMIT)) do
    unparkGroup(prefix, g, serverTimeMs())
  end
  return more and 2 or 1
end

local key = groupKey(prefix, gid)
rcall("HSETNX", metaKey, "seq", 0)
rcall("ZADD", prefix .. "groups:index", "NX", 0, gid)
if action == "set" then
  applySettings(key)
  recountRunning(prefix, gid)
elseif action == "pause" then
  rcall("HSET", key, "paused", "1")
  rcall("SADD", prefix .. "groups:paused", gid)
  syncOwnSettings(prefix, gid)
  return 1
elseif action == "resume" then
  rcall("HDEL", key, "paused")
  rcall("SREM", prefix .. "groups:paused", gid)
elseif action == "hold" then
  rcall("HSET", key, "hold", args["reason"], "holdInfo", cjson.encode(args["info"] or {}))
  if args["until"] and args["until"] ~= cjson.null then
    rcall("HSET", key, "holdUntil", args["until"])
  else
    rcall("HDEL", key, "holdUntil")
  end
  rcall("SADD", prefix .. "groups:held", gid)
  syncOwnSettings(prefix, gid)
  return 1
elseif action == "release" then
  local reason = args["reason"]
  if reason and reason ~= cjson.null and rcall("HGET", key, "hold") ~= reason then
    return 0
  end
  rcall("HDEL", key, "hold", "holdUntil", "holdInfo")
  rcall("SREM", prefix .. "groups:held", gid)
else
  return redis.error_reply("unknown group action " .. tostring(action))
end
syncOwnSettings(prefix, gid)
local more = false
if action == "set" and args["weight"] ~= nil then
  more = retagLater(prefix, gid)
end
rcall("ZREM", prefix .. "groups:timed", gid)
-- Whatever may let the group run again gives its parked tickets turns.
unparkGroup(prefix, gid, serverTimeMs())
return more and 2 or 1
