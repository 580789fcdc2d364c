--[[
  A delivery has finished (delivered, or failed for good): take it off the
  head of its outbox and return the next one, which must become a queue job.

  KEYS[1]  the outbox list
  KEYS[2]  the outbox entries hash
  ARGV[1]  the finished delivery's id

  Returns {next id, next JSON}, or {false, false} when the outbox is empty.
  A delivery that is not the head (a retried run of one already popped)
  changes nothing and still returns the head.
]]
if redis.call("LINDEX", KEYS[1], 0) == ARGV[1] then
  redis.call("LPOP", KEYS[1])
  redis.call("HDEL", KEYS[2], ARGV[1])
end
local head = redis.call("LINDEX", KEYS[1], 0)
if not head then
  return {false, false}
end
return {head, redis.call("HGET", KEYS[2], head)}
