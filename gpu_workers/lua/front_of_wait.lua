-- Move one job to the head of a queue's wait list, the right end BullMQ
-- claims from (gpu_workers/placement.py), only if it is still waiting.
-- LREM counts from the right (-1): the job is among the first few there, so
-- a long wait list is not scanned; ids in wait are unique.
--
-- KEYS[1] wait
-- ARGV[1] the job id
--
-- Returns 1 when moved, 0 when it was no longer in wait.

if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[1], ARGV[1])
  return 1
end
return 0
