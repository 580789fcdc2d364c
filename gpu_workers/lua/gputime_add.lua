-- One attempt's GPU time added to its hashes (gpu_workers/gputime.py).
-- KEYS: the hashes to add to. ARGV[1]: keys a hash may hold; ARGV[2]: the key
-- past them; then 6 per hash: key, expire-at (unix s; 0 = never), GPU-s,
-- VRAM-GiB-s, attempts, simulated GPU-s. Returns the number of hashes.

local cap = tonumber(ARGV[1]) * 4
local i = 3
for k = 1, #KEYS do
  local h, member, at = KEYS[k], ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('HEXISTS', h, 'n|' .. member) == 0
      and redis.call('HLEN', h) >= cap then
    member = ARGV[2]
  end
  redis.call('HINCRBYFLOAT', h, 's|' .. member, ARGV[i + 2])
  redis.call('HINCRBYFLOAT', h, 'v|' .. member, ARGV[i + 3])
  redis.call('HINCRBY', h, 'n|' .. member, ARGV[i + 4])
  redis.call('HINCRBYFLOAT', h, 'sim|' .. member, ARGV[i + 5])
  if at > 0 then redis.call('EXPIREAT', h, at) end
  i = i + 6
end
return #KEYS
