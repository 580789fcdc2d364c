"""bench/dashboard.py's data: jobs written in the BullMQ 6 layout by a Lua
script in batches, the 99 small queues, and full Bullpen series and GPU-time
buckets (as a week of sampling and accounting leaves them)."""

from __future__ import annotations

import time
from typing import Any

FILL_LUA = """
-- ARGV: base ("bull:big:"), first id, count, now (ms), state
local base, first, count, now, state = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), ARGV[5]
for i = first, first + count - 1 do
  local id = tostring(i)
  local ts = now - (first + count - i) * 3
  redis.call('HSET', base .. id, 'name', 'render', 'data',
    '{"prompt":"a cat in a hat","seed":' .. i .. ',"steps":30}',
    'opts', '{"attempts":3,"backoff":{"type":"exponential","delay":1000}}',
    'timestamp', ts, 'delay', 0, 'priority', 0, 'atm', 1, 'ats', 1)
  if state == 'completed' or state == 'failed' then
    redis.call('HSET', base .. id, 'processedOn', ts + 40, 'finishedOn', ts + 900,
      'pb', 'bench:w1')
    if state == 'completed' then
      redis.call('HSET', base .. id, 'returnvalue', '{"ok":true}')
    else
      redis.call('HSET', base .. id, 'failedReason', 'CUDA out of memory',
        'stacktrace', '["Error: CUDA out of memory"]')
    end
    redis.call('ZADD', base .. state, ts + 900, id)
  elseif state == 'delayed' then
    redis.call('ZADD', base .. 'delayed', (ts + 3600000) * 4096 + (i % 4096), id)
  else
    redis.call('LPUSH', base .. 'wait', id)
  end
end
redis.call('SET', base .. 'id', first + count - 1)
redis.call('HSET', base .. 'meta', 'opts.maxLenEvents', 10000)
return first + count - 1
"""


def fill(
    r: Any, name: str, first: int, count: int, state: str, batch: int = 10_000
) -> None:
    """Jobs first..first+count-1 of queue `name`, all in `state`."""
    script = r.register_script(FILL_LUA)
    now = int(time.time() * 1000)
    done = 0
    while done < count:
        n = min(batch, count - done)
        script(args=[f"bull:{name}:", first + done, n, now, state])
        done += n


def build_small_queues(r: Any, n: int) -> None:
    for i in range(n):
        name = f"q{i:03d}"
        fill(r, name, 1, 40, "waiting")
        fill(r, name, 41, 20, "delayed")
        fill(r, name, 61, 30, "completed")
        fill(r, name, 91, 10, "failed")


def seed_series(r: Any, queues: list[str]) -> None:
    """Every level of each queue's series, and of the overall one, full, as
    a day and a week of sampling leave them (gpu_workers/series)."""
    from gpu_workers.keys import BullpenKeys
    from gpu_workers.series.points import dump
    from gpu_workers.series.store import LEVELS

    keys, now = BullpenKeys(), int(time.time() * 1000)
    pipe = r.pipeline(transaction=False)
    series = [
        (keys.series("bull", name, level), 1, level)
        for name in queues
        for level in LEVELS
    ]
    series += [(keys.series_overall(level), len(queues), level) for level in LEVELS]
    for key, n, level in series:
        width, keep, _ = LEVELS[level]
        mapping = {}
        # The open minute and the one before have no point yet, as in a
        # running system (samplers write a minute ~20 s after it ends, the
        # overall one a minute later): the 1 h charts read them live.
        end = now - now % width - (width if level == "1m" else 0)
        for t in range(now - now % width - keep + width, end, width):
            point = {"t": t, "m": width // 60_000, "c": 30 * n, "f": n, "n": 31 * n}
            point.update(w50=0.4, w95=2.5, r50=1.2, r95=3.1, b=50 * n, a=4 * n, o=12.0)
            mapping[dump(point)] = t
        pipe.zadd(key, mapping)
    pipe.execute()


def fill_gpu_time(r: Any) -> None:
    """Every GPU-time bucket the pages may read, full: 8 days of hours and 31
    of days, each dimension holding the cap's worth of keys and "(other)"."""
    from gpu_workers import gputime
    from gpu_workers.keys import BullpenKeys

    keys, cap, now = BullpenKeys(), gputime.Retention().max_keys, time.time()
    members = [f"key-{i:03d}" for i in range(cap)] + [gputime.OTHER]
    pipe = r.pipeline(transaction=False)
    for period, count in ((gputime.HOUR, 8 * 24), (gputime.DAY, 31)):
        step = gputime.PERIOD_S[period]
        for b in gputime.bucket_starts(period, now - count * step, now):
            stamp = gputime.bucket_stamp(period, b)
            for dim in gputime.DIMENSIONS:
                fields: dict[str, Any] = {}
                for i, m in enumerate(members):
                    fields.update({f"s|{m}": 60.5 * i, f"v|{m}": 121.0 * i})
                    fields.update({f"n|{m}": i, f"sim|{m}": 0})
                pipe.hset(keys.gputime(period, stamp, dim), mapping=fields)
            whole = {f"s|{gputime.WHOLE}": 60.5 * cap * (cap + 1) / 2}
            whole.update({f"v|{gputime.WHOLE}": 121.0 * cap * (cap + 1) / 2})
            whole.update({f"n|{gputime.WHOLE}": cap * (cap + 1) // 2})
            whole.update({f"sim|{gputime.WHOLE}": 0})
            pipe.hset(keys.gputime(period, stamp, gputime.ALL), mapping=whole)
        pipe.execute()
