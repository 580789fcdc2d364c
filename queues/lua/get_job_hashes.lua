--[[
  Read jobs for display, each hash together with its state in one atomic
  step (a reader never sees "completed" beside the fields of before). With a
  cap, every field whose value is at most ARGV[1] bytes, and only the length
  of longer ones, so that a page of jobs holding megabytes of data each costs
  what the page shows (nothing is copied out of Redis for the long values).
  A key that is not a hash (an id naming another key) reads as a gone job.

  KEYS[1..8] the state keys, in get_state's order (completed, failed,
             delayed, prioritized, active, wait, paused, waiting-children)
  KEYS[8+i]  the hash key of job i

  ARGV[1]   cap in bytes; negative: no cap (every field whole)
  ARGV[2]   "1": find each job's state too (an LPOS over `wait` for a
            waiting job, so only when the state is shown); else "" states
  ARGV[2+i] the id of job i

  Returns one {fields, left_out, state} triple per job: `fields` is a flat
  field/value list (empty when the job is gone), `left_out` a flat
  field/byte-length list of the values over the cap, `state` the name of
  the state that holds the job ("unknown" when none does).
]]
--- @include "base"
--- @include "markers"
--- @include "groups"
--- @include "job_state"

local cap = tonumber(ARGV[1])
local withState = ARGV[2] == "1"
local out = {}
for i = 9, #KEYS do
  local key = KEYS[i]
  local fields, leftOut = {}, {}
  if rcall("TYPE", key)["ok"] == "hash" then
    if cap < 0 then
      fields = rcall("HGETALL", key)
    else
      for _, name in ipairs(rcall("HKEYS", key)) do
        local size = rcall("HSTRLEN", key, name)
        if size > cap then
          leftOut[#leftOut + 1] = name
          leftOut[#leftOut + 1] = size
        else
          fields[#fields + 1] = name
          fields[#fields + 1] = rcall("HGET", key, name)
        end
      end
    end
  end
  local state = ""
  if withState then
    state = jobState(KEYS, ARGV[i - 6])
  end
  out[#out + 1] = {fields, leftOut, state}
end
return out
