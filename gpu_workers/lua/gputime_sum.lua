-- Buckets of GPU time summed in Redis (gpu_workers/gputime.py).
-- KEYS: bucket hashes of one dimension. Sums them in Redis, so a page over 90
-- full buckets moves a few hundred numbers, not 36,000 fields. Returns {per
-- bucket: {s, v, n, sim}}, then {key, s, v, n, sim, key, ...} over them all.

local index = {s = 1, v = 2, n = 3, sim = 4}
local per, order, buckets = {}, {}, {}
for k = 1, #KEYS do
  local flat = redis.call('HGETALL', KEYS[k])
  local t = {0, 0, 0, 0}
  for i = 1, #flat, 2 do
    local f = flat[i]
    local bar = string.find(f, '|', 1, true)
    local at = bar and index[string.sub(f, 1, bar - 1)]
    local v = tonumber(flat[i + 1])
    if at and v then
      local member = string.sub(f, bar + 1)
      local row = per[member]
      if not row then
        row = {0, 0, 0, 0}
        per[member] = row
        order[#order + 1] = member
      end
      row[at] = row[at] + v
      t[at] = t[at] + v
    end
  end
  buckets[k] = {tostring(t[1]), tostring(t[2]), tostring(t[3]), tostring(t[4])}
end
local rows = {}
for _, member in ipairs(order) do
  local row = per[member]
  rows[#rows + 1] = member
  for j = 1, 4 do rows[#rows + 1] = tostring(row[j]) end
end
return {buckets, rows}
