--[[
  Find which state holds a job (docs/protocol.md §4.18, getStateV2 order):
  completed, failed, delayed, prioritized (ZSCORE), then active, wait,
  paused (LPOS), then waiting-children.

  KEYS[1] completed
  KEYS[2] failed
  KEYS[3] delayed
  KEYS[4] prioritized
  KEYS[5] active
  KEYS[6] wait
  KEYS[7] paused
  KEYS[8] waiting-children

  ARGV[1] job id

  Returns the state name, or "unknown".
]]
--- @include "base"
--- @include "markers"
--- @include "groups"
--- @include "job_state"

return jobState(KEYS, ARGV[1])
