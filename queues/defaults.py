"""Tunables of the queue core, with their units in their names."""

from __future__ import annotations

PREFIX = "bull"
LOCK_DURATION_MS = 30_000
STALLED_INTERVAL_MS = 30_000
MAX_STALLED_COUNT = 1
DRAIN_DELAY_S = 5.0
MAX_EVENTS = 10_000
STACKTRACE_LIMIT = 10
CLOSE_TIMEOUT_S = 30.0
RATE_LIMIT_MAX_DELAY_MS = 30_000
RECONNECT_DELAY_MAX_S = 5.0
#: A sentinel's answer is awaited this long: a dead sentinel must not hold up
#: asking the next one which server is the primary.
SENTINEL_TIMEOUT_S = 2.0
EVENTS_BLOCK_MS = 10_000
PROMOTE_BATCH = 1_000
CLEAN_BATCH = 10_000
OBLITERATE_BATCH = 1_000
#: Jobs a drain call removes (about 10 ms of Redis: a million in one call
#: held it ten seconds).
DRAIN_BATCH = 1_000
RETRY_BATCH = 1_000
FETCH_BATCH_MAX = 64
PRIORITY_LIMIT = 2**21 - 1
HELPER_STOP_S = 2.0
HOOKS_STOP_S = 10.0
#: Connections a worker's pools hold beyond one per job it may run at once
#: (claims and finishes, lock renewal, the stalled check, schedulers).
WORKER_POOL_SPARE = 8
#: Attempt history (queues/attempts.py): the namespace outside every queue's
#: keys, the newest attempts kept per job, and how long a job's history
#: outlives its last write (BullMQ removes jobs in Lua, which never touches
#: it: an orphan history expires). 7 days, as GPU workers' VRAM records.
ATTEMPTS_NAMESPACE = "bullpen"
ATTEMPTS_KEEP = 20
ATTEMPTS_TTL_S = 7 * 24 * 3600
#: An attempt's saved error text is cut at this many characters.
ATTEMPT_ERROR_MAX_CHARS = 2_000

#: Seconds a CLIENT LIST census of connected workers is reused by readers
#: that ask often (pages, scrapes, API status calls: queues.clients.recent_census).
WORKER_CENSUS_MAX_AGE_S = 5.0
