--[[
  Read a few fields of one job whose id came from a set another client may
  have written: a key that is not a hash (the id names one of the queue's own
  keys, such as `id`, or a job's `logs` list) reads as a gone job instead of
  failing, with WRONGTYPE, the whole pipeline that carries the read (a
  statistic over many jobs loses one value, not every queue's).

  KEYS[1] the job's hash key

  ARGV[i] the name of field i

  Returns one value per field, nil where the field or the job is absent, all
  nil when KEYS[1] is not a hash.
]]
--- @include "base"

if rcall("TYPE", KEYS[1])["ok"] == "hash" then
  return rcall("HMGET", KEYS[1], unpack(ARGV))
end
local gone = {}
for i = 1, #ARGV do
  gone[i] = false
end
return gone
