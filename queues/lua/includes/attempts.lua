--[[
  Attempt history (queues/attempts.py): push an ended attempt's record on
  its job's list, keep the newest `keep`, renew the list's TTL. The record
  comes as JSON text without its closing brace and without `outcome`, which
  is added here from the code Redis answered with: the worker's intended
  outcome when 0, else `lost` with the code, so a record never says what
  Redis refused. Text, never decoded: numbers keep every digit.
]]
local function pushAttempt(attempt, code)
  local key = attempt["key"]
  local outcome = ',"outcome":"' .. attempt["intended"] .. '"}'
  if code ~= 0 then
    outcome = ',"outcome":"lost","code":' .. code .. '}'
  end
  local keep = tonumber(attempt["keep"])
  if rcall("LPUSH", key, attempt["record"] .. outcome) > keep then
    rcall("LTRIM", key, 0, keep - 1)
  end
  rcall("EXPIRE", key, intText(tonumber(attempt["ttl"])))
end
