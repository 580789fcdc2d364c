-- The first jobs of a queue's wait list in claim order (gpu_workers/placement.py).
-- BullMQ LPUSHes wait and claims from the right, so the next job is LINDEX
-- wait -1. Reads only; a job's data is read only when it is short.
--
-- KEYS[1] wait
-- KEYS[2] meta
-- ARGV[1] the queue's key prefix (`bull:name:`; a job's hash is prefix .. id)
-- ARGV[2] how many jobs to look at (N)
-- ARGV[3] the longest data read, in bytes (longer: false)
--
-- Returns {paused (1 | 0: meta `paused`), the wait list's length,
-- {id, name, timestamp, delay, data, id, ...}}: the first N jobs, the next
-- one first; a field the job hash lacks (or data over the cap) is false.
-- BullMQ's old "0:..." markers in wait are skipped.

local prefix = ARGV[1]
local n = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local paused = redis.call('HEXISTS', KEYS[2], 'paused')
local len = redis.call('LLEN', KEYS[1])
local jobs = {}
if n > 0 and len > 0 then
  local ids = redis.call('LRANGE', KEYS[1], -n, -1)
  for i = #ids, 1, -1 do
    local id = ids[i]
    if string.sub(id, 1, 2) ~= '0:' then
      local key = prefix .. id
      local f = redis.call('HMGET', key, 'name', 'timestamp', 'delay')
      local data = false
      if redis.call('HSTRLEN', key, 'data') <= cap then
        data = redis.call('HGET', key, 'data')
      end
      jobs[#jobs + 1] = id
      jobs[#jobs + 1] = f[1]
      jobs[#jobs + 1] = f[2]
      jobs[#jobs + 1] = f[3]
      jobs[#jobs + 1] = data
    end
  end
end
return {paused, len, jobs}
