"""Live updates: one events reader per process fanning out through the channel layer.

- `reader`: `EventsReader`, following the events streams of the queues that
  this process's sockets subscribe to, and the workers stream (XREAD BLOCK on
  one connection), sending batches, counts and worker snapshots to groups
- `messages`: stream entries as the browser messages of docs/dashboard-design.md
- `coalesce`: the latest-wins rate limit on progress (per job, 10 a second)
- `subscriptions`: parsing and validating a socket's `subscribe` message
"""
