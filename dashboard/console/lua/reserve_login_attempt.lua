--[[
  Reserve one login attempt of a username from a client address before its
  password is checked, or refuse it: the check and the count are one step, so
  logins sent at once cannot all pass the check before any is counted.

  KEYS[1]  the pair's failures counter (dashboard/console/login_throttle.py)
  ARGV[1]  the most attempts allowed (BULLPEN_LOGIN_MAX_FAILURES)
  ARGV[2]  the lockout, s (BULLPEN_LOGIN_LOCKOUT_S), counted from the last
           attempt let through

  Returns {admitted (1|0), attempts counted (this one included when admitted),
  seconds until the count expires}. A refused attempt leaves the count and
  its expiry alone.
]]
local limit = tonumber(ARGV[1])
local lockout = tonumber(ARGV[2])
local counted = tonumber(redis.call("GET", KEYS[1]) or "0")
if counted >= limit then
  return {0, counted, redis.call("TTL", KEYS[1])}
end
counted = redis.call("INCR", KEYS[1])
redis.call("EXPIRE", KEYS[1], lockout)
return {1, counted, lockout}
