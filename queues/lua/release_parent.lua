--[[
  The last step of a flow insert: a parent whose children were all already
  completed (existing custom ids) has no pending dependency left, so it
  leaves `waiting-children` now (to wait, prioritized or delayed, with its
  `waiting`/`delayed` event). A no-op for a parent that still waits for a
  child or is no longer in `waiting-children`; a parent marked
  `flowAttachmentFailed` (a child belonged to another parent) stays put and
  loses the mark.

  KEYS[1] parent job hash

  ARGV[1] parent queue key ("bull:name", no trailing colon)
  ARGV[2] parent id
  ARGV[3] now (ms)

  Returns 1 when the parent was released, else 0.
]]
--- @include "base"
--- @include "markers"
--- @include "metadata"
--- @include "scores"
--- @include "parents"

if rcall("HGET", KEYS[1], "flowAttachmentFailed") then
  rcall("HDEL", KEYS[1], "flowAttachmentFailed")
  return 0
end
local waitingChildren = ARGV[1] .. ":waiting-children"
if rcall("EXISTS", KEYS[1]) == 1 and rcall("ZSCORE", waitingChildren, ARGV[2]) and
   rcall("SCARD", KEYS[1] .. ":dependencies") == 0 then
  releaseParentIfReady(ARGV[1], KEYS[1], ARGV[2], tonumber(ARGV[3]), false)
  return 1
end
return 0
