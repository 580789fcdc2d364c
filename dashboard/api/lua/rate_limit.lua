--[[
  Take one request from a token's rate limit (GCRA: a token bucket of
  `limit` requests refilled evenly over `period_ms`).

  KEYS[1]  the token's rate-limit key (its theoretical arrival time, ms)
  ARGV[1]  now (ms)
  ARGV[2]  limit (requests per period)
  ARGV[3]  period (ms)

  Returns {allowed (1|0), remaining, retry_after_ms}.
]]
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local interval = period / limit
local burst = period - interval
local tat = tonumber(redis.call("GET", KEYS[1]) or now)
if tat < now then
  tat = now
end
if tat - now > burst then
  return {0, 0, math.ceil(tat - now - burst)}
end
local new_tat = tat + interval
redis.call("SET", KEYS[1], tostring(new_tat), "PX", math.ceil(new_tat - now) + 1)
return {1, math.floor((now + burst - new_tat) / interval) + 1, 0}
