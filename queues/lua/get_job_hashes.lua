--[[
  Read job hashes for display: every field whose value is at most ARGV[1]
  bytes, and only the length of longer ones, so that a page of jobs holding
  megabytes of data each costs what the page shows (nothing is copied out
  of Redis for the long values).

  KEYS[i] job hash keys
  ARGV[1] cap in bytes

  Returns one {fields, left_out} pair per key: `fields` is a flat
  field/value list (empty when the job is gone), `left_out` a flat
  field/byte-length list of the values over the cap.
]]
--- @include "base"

local cap = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local fields, leftOut = {}, {}
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
  out[i] = {fields, leftOut}
end
return out
