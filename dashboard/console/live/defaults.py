"""Tunables of live updates, with their units in their names."""

from __future__ import annotations

#: Longest the reader's XREAD BLOCK waits; also the counts period's resolution.
XREAD_BLOCK_MS = 1_000
#: After a read that found entries, the next read waits until this long after
#: it: a lone event goes out at once, but a busy stream is sent in batches of
#: what came in meanwhile (each batch costs a handful of Redis calls and one
#: frame per socket, whatever its size), for at most this much added delay.
BATCH_INTERVAL_S = 0.02
#: Entries one XREAD takes per stream (bounds a batch).
XREAD_COUNT = 1_000
#: How often the reader reads the counts of each followed queue.
COUNTS_INTERVAL_S = 1.0
#: Progress of one job goes out at most once per this interval (10 a second):
#: the reader coalesces it once for all of its process's sockets.
PROGRESS_INTERVAL_S = 0.1
#: A worker snapshot goes out at most this often after a heartbeat ...
WORKERS_MIN_INTERVAL_S = 1.0
#: ... and at least this often, so that expired records disappear.
WORKERS_MAX_INTERVAL_S = 5.0
#: How long daphne lets a socket take to connect and finish its opening
#: handshake (the consumer's session and permission checks included) before
#: it drops it: daphne's default, 5 s, dropped 148 of 200 browsers
#: reconnecting at once to a server on a busy 2-core machine (load 10), each
#: then retrying into the same queue. Every server `daphne_args` starts uses it.
HANDSHAKE_TIMEOUT_S = 30
#: Events a reconnecting socket is sent per queue at most (the newest ones).
REPLAY_MAX_EVENTS = 500
#: Jobs one socket may follow (the queues it and a process may follow are the
#: BULLPEN_LIVE_* settings, dashboard/shared/conf.py).
MAX_JOBS_PER_SOCKET = 500
#: How often an open socket checks again that its session is still logged in
#: and its user may still view queues (it also checks on every subscribe).
ACCESS_RECHECK_S = 30.0
#: A string field of an event longer than this is cut (job data is untrusted).
FIELD_MAX_CHARS = 2_000
#: How long the reader keeps running after its last subscriber left (page
#: navigation closes and reopens the socket).
LINGER_S = 30.0
#: Backoff of the reader after a Redis error.
RETRY_INITIAL_S = 0.5
RETRY_MAX_S = 5.0
