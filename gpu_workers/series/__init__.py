"""Charts over time: Bullpen's own sampled series, kept in Redis, bounded.

Per queue each minute: jobs completed and failed, wait and run time p50/p95,
backlog, active jobs and the oldest waiting job's age; per GPU: utilisation
and committed VRAM. `sampler` writes one point per series and minute however
many samplers run (supervisors, dashboard processes), `store` keeps 1-minute,
10-minute and hourly points trimmed on every write, `read` turns a range
into chart columns (`overall_series`: the overview's, kept combined by the
dashboards' samplers). Keys: keys.py (`series:*`).

    SeriesSampler(redis_url).tick([("bull", "render")])   # every few seconds
    queue_series(client, BullpenKeys(), [("bull", "render")], "1h", now_ms)
"""

from __future__ import annotations

from .read import RANGES, gpu_series, overall_series, queue_series
from .sampler import SeriesSampler

__all__ = ["RANGES", "SeriesSampler", "gpu_series", "overall_series", "queue_series"]
