--[[
  Put one delivery in the outbox of a job and destination, once, keeping
  event order; progress deliveries closer than the interval (in event time)
  to the last one queued are dropped.

  KEYS[1]  the outbox list (delivery ids, oldest first)
  KEYS[2]  the outbox entries hash (id -> delivery JSON)
  KEYS[3]  the outbox seen set (every id ever pushed)
  KEYS[4]  the job's progress throttle hash (target -> event ms)
  ARGV[1]  delivery id
  ARGV[2]  delivery JSON
  ARGV[3]  record TTL (ms)
  ARGV[4]  target name (the throttle field)
  ARGV[5]  event time (ms)
  ARGV[6]  progress interval (ms); 0 = not a progress delivery

  Returns {status, head id, head JSON}: status "pushed", "seen" (pushed
  before) or "throttled"; the head is the delivery that must be a queue job
  now (false when the outbox is empty).
]]
local id = ARGV[1]
local ttl = tonumber(ARGV[3])
local status = "pushed"
if redis.call("SISMEMBER", KEYS[3], id) == 1 then
  status = "seen"
else
  local interval = tonumber(ARGV[6])
  local at = tonumber(ARGV[5])
  if interval > 0 then
    local last = tonumber(redis.call("HGET", KEYS[4], ARGV[4]) or "-1")
    if last >= 0 and at - last < interval then
      status = "throttled"
    else
      redis.call("HSET", KEYS[4], ARGV[4], at)
      redis.call("PEXPIRE", KEYS[4], ttl)
    end
  end
  redis.call("SADD", KEYS[3], id)
  if status == "pushed" then
    redis.call("RPUSH", KEYS[1], id)
    redis.call("HSET", KEYS[2], id, ARGV[2])
  end
  for i = 1, 3 do
    redis.call("PEXPIRE", KEYS[i], ttl)
  end
end
local head = redis.call("LINDEX", KEYS[1], 0)
if not head then
  return {status, false, false}
end
return {status, head, redis.call("HGET", KEYS[2], head)}
