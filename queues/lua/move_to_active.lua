--[[
  Claim up to ARGV[4] jobs for a worker (docs/protocol.md §4.5, batched; one when the
  queue has a global limit and another worker may wait): promote due
  delayed jobs, honour the rate limiter, paused flag and global concurrency,
  pop from `wait` (tail) then `prioritized`, lock each job, emit `active`,
  set processedOn/pb, increment ats, and re-add the base marker.

  KEYS[1] wait
  KEYS[2] active
  KEYS[3] prioritized
  KEYS[4] events
  KEYS[5] limiter
  KEYS[6] delayed
  KEYS[7] meta
  KEYS[8] pc
  KEYS[9] marker

  ARGV[1] key prefix
  ARGV[2] now (ms)
  ARGV[3] JSON worker opts: token, seq, lockDuration, limiter?, name?
  ARGV[4] how many jobs to claim at most

  Returns {jobs, rateLimitTtl, nextDelayedMs}; jobs is a flat array of
  (jobId, lockToken, hash field/value array) triples (the hash as read
  before the claim, then the fields the claim wrote: where a field comes
  twice, the later value is the one in Redis).
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "promote_delayed"
--- @include "groups"
--- @include "retag"
--- @include "turns"
--- @include "fetch"

local q = {wait = KEYS[1], active = KEYS[2], prioritized = KEYS[3], events = KEYS[4],
  limiter = KEYS[5], delayed = KEYS[6], meta = KEYS[7], pc = KEYS[8], marker = KEYS[9]}
local opts = cjson.decode(ARGV[3])
local claimed = claimJobs(q, ARGV[1], tonumber(ARGV[2]), opts, tonumber(ARGV[4]),
  claimContended(q, opts))
return claimed
