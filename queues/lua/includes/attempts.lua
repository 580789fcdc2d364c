--[[
  Attempt history (queues/attempts.py): push an ended attempt's record on
  its job's list `key`, keep the newest `keep`, renew the list's TTL
  (`ttlText`, seconds as an integer's text). The record comes as JSON text
  ending with the outcome the worker intended (`,"outcome":"<intended>"}`):
  kept when Redis answered 0, else replaced by `lost` with the code, so a
  record never says what Redis refused. Text, never decoded: numbers keep
  every digit (and the common case copies nothing).
]]
local function pushAttempt(key, record, intended, code, keep, ttlText)
  if code ~= 0 then
    local hoped = ',"outcome":"' .. intended .. '"}'
    if string.sub(record, -#hoped) == hoped then
      record = string.sub(record, 1, #record - #hoped) .. ',"outcome":"lost","code":' ..
        code .. '}'
    end
  end
  if rcall("LPUSH", key, record) > keep then
    rcall("LTRIM", key, 0, keep - 1)
  end
  rcall("EXPIRE", key, ttlText)
end
