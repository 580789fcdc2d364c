"""Live updates: one events reader per process, handing what it reads to
that process's sockets in memory.

- `consumers`, `routing`: the `/ws/live/` socket and its route
- `reader`: `EventsReader`, following the events streams of the queues that
  this process's sockets subscribe to, and the workers stream (XREAD BLOCK on
  one connection), handing batches, counts and worker snapshots to the hub
- `hub`: routes those to the local sockets of each group; the one
  channel-layer member per process for the control messages of `access`
- `access`: who may keep a socket open (logout, lost permissions)
- `replay`, `snapshots`: what a subscribe reads once; what the reader reads
  on a clock (counts, workers)
- `messages`: stream entries as the browser messages of docs/dashboard-design.md
- `coalesce`: the latest-wins rate limit on progress (per job, 10 a second)
- `subscriptions`: parsing and validating a socket's `subscribe` message
"""
