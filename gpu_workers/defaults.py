"""Tunables of the GPU worker layer, with their units in their names.

The ones an operator sets (BULLPEN_* variables) take their defaults from the
table in `gpu_workers/settings.py`, the one place they are written.
"""

from __future__ import annotations

from .settings import default
from .units import parse_bytes

#: Bullpen's own Redis namespace (never a queue prefix).
NAMESPACE: str = default("namespace")
#: Queue prefix when a worker config names none (BullMQ's default).
QUEUE_PREFIX = "bull"

# --- VRAM budget: total - driver reserve - CUDA context - safety margin ---
DRIVER_RESERVE_BYTES = parse_bytes(default("vram_reserve"))
CUDA_CONTEXT_BYTES = parse_bytes(default("vram_cuda_context"))
SAFETY_MARGIN_BYTES = parse_bytes(default("vram_margin"))
#: Jobs a worker process may hold at once (claimed + running).
SLOTS = 3
#: Upper limit on slots that set_desired() accepts.
MAX_SLOTS = 16

# --- heartbeats, control and reconciling ---
HEARTBEAT_INTERVAL_S: float = default("heartbeat_interval_s")
#: A worker also beats this soon after a job is claimed, admitted or ended
#: (changes within it share one beat), so pages show the change at once.
HEARTBEAT_SOON_S = 0.2
#: A record without a fresh heartbeat disappears after this (3 missed beats).
HEARTBEAT_TTL_S: float = default("heartbeat_ttl_s")
#: How often a worker looks at its parent (a local call) and, while jobs
#: run, at their cancel flags.
CONTROL_INTERVAL_S = 0.25
#: How often the supervisor reconciles its children locally (kills overdue
#: drains); desired counts are re-read when pushed (control.py) or every
#: DESIRED_SAFETY_S.
RECONCILE_INTERVAL_S = 0.5
#: How long a worker's or supervisor's blocking read of its control streams
#: waits (control.py): an idle process sends one XREAD per this.
CONTROL_BLOCK_MS = 60_000
#: How often a worker re-reads its slot target without a push (a writer
#: that did not announce its change).
CONTROL_SAFETY_S = 60.0
#: How often a supervisor re-reads its desired counts without a push: one
#: HGETALL per host, so often enough to write back counts Redis lost (a
#: flush, a failover to an empty replica) within seconds.
DESIRED_SAFETY_S = 5.0
#: Entries kept in each control stream (only the newest few matter).
CONTROL_STREAM_MAXLEN = 100
#: A supervised worker rewrites its record when it changes, else this often;
#: its supervisor vouches for it in `bullpen:workers` every host beat.
RECORD_REFRESH_S = 60.0
#: How often a supervisor trims the expired entries of the index zsets.
INDEX_TRIM_S = 30.0
#: How long a GPU worker's idle BZPOPMIN on its queue's marker blocks. A
#: job added, promoted or put back writes the marker and wakes it at once
#: (and a claim re-adds it while others wait), so this only bounds how often
#: an idle worker claims for nothing: each timeout costs a claim script of
#: about ten commands (queues' default is 5 s: 2.4 commands/s per worker).
WORKER_DRAIN_DELAY_S = 60.0
#: How often the supervisor's reap loop polls its children.
REAP_INTERVAL_S = 0.1
#: How often a worker samples NVML per-process memory while jobs run.
PEAK_SAMPLE_INTERVAL_S = 0.2
#: Entries kept in the workers stream (heartbeats and state changes).
STREAM_MAXLEN = 10_000

# --- restarts and draining ---
MAX_RESTARTS: int = default("max_restarts")
RESTART_WINDOW_S: float = default("restart_window_s")
RESTART_BACKOFF_INITIAL_S = 0.5
RESTART_BACKOFF_MAX_S = 30.0
#: How long draining workers may finish running jobs before they are killed.
DRAIN_TIMEOUT_S: float = default("drain_timeout_s")
#: Extra time the supervisor grants a draining child past its drain timeout.
DRAIN_KILL_GRACE_S = 5.0
#: How long a worker whose CUDA is broken waits for its other jobs.
BROKEN_CLOSE_TIMEOUT_S = 5.0

# --- bookkeeping kept in Redis ---
#: How long per-job VRAM records (declared vs measured peak) are kept.
JOB_RECORD_TTL_S = 7 * 24 * 3600
#: GPU-time accounting (gputime.py): hours an hour bucket is kept after it
#: ends, days a day bucket is, and keys (queues, job names, tenants) one
#: bucket holds before the rest fold into "(other)".
GPU_TIME_HOURS_KEPT: int = default("gpu_time_hours_kept")
GPU_TIME_DAYS_KEPT: int = default("gpu_time_days_kept")
GPU_TIME_MAX_KEYS: int = default("gpu_time_max_keys")
#: How long a cancel request waits for a worker to see it.
CANCEL_TTL_S = 24 * 3600
#: Bounds on what the shipped demo and torch handlers take from job data
#: (job data is untrusted: it must not hold a worker for days).
HANDLER_MAX_STEPS = 10_000
HANDLER_MAX_STEP_S = 60.0
HANDLER_MAX_MATMULS = 1_000
#: A job's progress writes from a sync handler wait at most this long.
PROGRESS_WRITE_TIMEOUT_S = 10.0

# --- queue worker settings handed to queues.AsyncWorker ---
LOCK_DURATION_MS = 30_000
STALLED_INTERVAL_MS = 30_000
MAX_STALLED_COUNT = 1

#: Exit status of a worker process whose CUDA state is broken (restart it).
EXIT_CUDA_BROKEN = 70
#: Exit status of a worker process that gave its waiting jobs back to be
#: started afresh: VRAM it could not give back kept them out (residency.py);
#: the supervisor restarts it at once (EX_TEMPFAIL).
EXIT_RECYCLE = 75
#: Consecutive idle readings (one per heartbeat interval, after the
#: allocator's cache is freed) that must show unreclaimed VRAM keeping a
#: waiting job out before the process recycles.
RECYCLE_READINGS = 2
#: Exit status of a worker process that cannot start (bad config, handler import).
EXIT_CONFIG = 78
#: Per-minute finished-job counts kept per queue in BullMQ's `metrics:*` keys
#: (a week; 0 = collect none). bull-board, Node's getMetrics() and the
#: dashboard's /metrics totals read them.
METRICS_DATA_POINTS: int = default("metrics_data_points")

# --- "why is this job waiting?" (waiting/) ---
#: Ids of `wait` each of two LPOS scans reads for a job's place in line, one
#: from the tail (the front of the line), one from the head (the back); a job
#: further than this from both ends reads as a range of places.
WAITING_POSITION_SCAN = 10_000
#: Pending children a waiting parent names (SRANDMEMBER count).
WAITING_CHILDREN_SHOWN = 10
#: Minutes of finished jobs the ETA's throughput is measured over.
WAITING_THROUGHPUT_WINDOW_MIN = 5

# --- charts over time (series/) ---
#: How often a sampler (the supervisor, each dashboard process) looks for a
#: finished minute to sample; one point per minute is kept whatever the number.
SERIES_TICK_S = 15.0
#: Seconds after a minute ends before it is sampled: workers' clocks may lag.
SERIES_SETTLE_MS = 5_000
#: Newest finished jobs (completed and failed each) of a minute whose wait
#: and run times give its percentiles: bounds a sample's reads.
SERIES_SAMPLE_JOBS = 200
#: Levels of points: name, width (ms), how long they are kept (ms), the most
#: kept (a wrong clock cannot grow a series past it).
SERIES_LEVELS = (
    ("1m", 60_000, 24 * 3600_000, 1_500),
    ("10m", 600_000, 2 * 24 * 3600_000, 300),
    ("1h", 3600_000, 8 * 24 * 3600_000, 200),
)
#: A chart's range -> the level it reads.
SERIES_RANGES = {"1h": "1m", "24h": "10m", "7d": "1h"}
#: Lifetime of a minute's claim (long past the minutes a sampler tries).
SERIES_CLAIM_TTL_S = 3_600

# --- models resident on GPUs (models.py, residency.py, placement.py) ---
#: Bounds (seconds) of the model-load histogram; +Inf is implied.
MODEL_LOAD_BUCKETS_S = (1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0)
#: Weight of the newest load in a model's expected load time (EWMA).
MODEL_LOAD_EWMA = 0.3
#: How often a worker re-reads model stats, pins and its warm pool without
#: a push (pins and pool changes are announced on the control stream).
MODEL_REFRESH_S = 60.0
#: A model whose load raised is not retried on that GPU for this long,
#: doubling per failure up to the max.
MODEL_LOAD_BACKOFF_S = 5.0
MODEL_LOAD_BACKOFF_MAX_S = 300.0
#: The model events stream keeps about this many entries.
MODEL_EVENTS_MAXLEN = 10_000
#: After an unload, the probe must show at least this share of the weights
#: given back, else the shortfall stays committed until a reading shows it.
MODEL_RECLAIM_SHARE = 0.9

# --- warm pools: which models GPUs keep resident (pools.py) ---
#: How often the planning supervisor redraws the pools (the others skip).
POOL_TICK_S = 10.0
#: ... and how often while its last tick found nothing waiting and changed
#: no pool (an idle fleet): the records are still rewritten well within
#: POOL_STALE_S, and the planner lock outlives it.
POOL_IDLE_TICK_S = 30.0
#: Waiting jobs read per queue (wait list and prioritized each) for a backlog
#: estimate, and the longest job data read for its model (longer: no model).
POOL_BACKLOG_SAMPLE = 200
POOL_DATA_MAX_BYTES = 64 * 1024
#: Hysteresis: a GPU changes model once the plan has wanted the same change
#: for POOL_HOLD_TICKS ticks in a row and POOL_HOLD_S seconds, and it has
#: kept its model POOL_MIN_DWELL_S; a model's GPUs change only when its share
#: moved by at least POOL_DEAD_BAND_GPUS GPUs and POOL_DEAD_BAND_SHARE of
#: what it has.
POOL_HOLD_TICKS = 3
POOL_HOLD_S = 30.0
POOL_MIN_DWELL_S = 60.0
POOL_DEAD_BAND_GPUS = 1.0
POOL_DEAD_BAND_SHARE = 0.25
#: Most models an operator may pin to one GPU.
POOL_MAX_PINS = 8
#: A worker ignores a pool record older than this (no supervisor plans).
POOL_STALE_S = 2 * POOL_IDLE_TICK_S
