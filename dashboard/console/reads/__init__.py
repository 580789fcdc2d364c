"""What the pages read from Redis, one module per page or concern.

- `queue`: a queue's counts, header and a page of its jobs
- `overview`: per-queue stats for the overview, the worker census
- `job`: the job page's detail, due times, VRAM record
- `attempts`: a job's attempts, recorded by Bullpen's workers or from BullMQ
- `fleet`: the GPU page's hosts, GPUs, workers and capacity
- `scan`: bounded, resumable scans (search, failure triage)
- `server`: INFO of the server or of each primary (/metrics, the Redis page)
- `redis_panel`: the Redis page (INFO, keys per prefix, slowlog)
- `workers`: the workers page (CLIENT LIST joined with GPU heartbeats)

Per-queue reads are `queues.ops` generators run together with
`queues.drive.gather`, so the overview of 100 queues costs a few pipelined
round trips, not hundreds. What they share (`run` on the pages' client, the
GPU `gpu_fleet`, `reset` of every cache they keep) is dashboard/shared/reads.py,
since queue discovery (dashboard/shared/discovery.py) uses it too.
"""

from __future__ import annotations

from dashboard.shared.reads import fleet_snapshot, gpu_fleet, on_reset, reset, run

__all__ = ["fleet_snapshot", "gpu_fleet", "on_reset", "reset", "run"]
