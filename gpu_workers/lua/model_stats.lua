-- One model load or one job with a model, folded into the model's fleet-wide
-- stats (gpu_workers/model_upkeep.py): a JSON object per field of the hash.
-- KEYS[1]: bullpen:models:stats. ARGV: model, kind (load | job), seconds,
-- weights bytes (loads; 0 = keep), EWMA weight of the newest load, now (ms).
-- Returns the stored JSON.

local raw = redis.call('HGET', KEYS[1], ARGV[1])
local stats = {}
if raw then
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' then stats = decoded end
end
local function num(v) return tonumber(v) or 0 end
local seconds = tonumber(ARGV[3]) or 0
if ARGV[2] == 'load' then
  local loads = num(stats['loads'])
  local alpha = tonumber(ARGV[5]) or 0.3
  if loads == 0 or stats['ewma_load_s'] == nil then
    stats['ewma_load_s'] = seconds
  else
    stats['ewma_load_s'] = alpha * seconds + (1 - alpha) * num(stats['ewma_load_s'])
  end
  stats['loads'] = loads + 1
  stats['load_s_sum'] = num(stats['load_s_sum']) + seconds
  if num(ARGV[4]) > 0 then stats['weights_bytes'] = num(ARGV[4]) end
else
  stats['jobs'] = num(stats['jobs']) + 1
  stats['job_s_sum'] = num(stats['job_s_sum']) + seconds
end
stats['ts_ms'] = num(ARGV[6])
local out = cjson.encode(stats)
redis.call('HSET', KEYS[1], ARGV[1], out)
return out
