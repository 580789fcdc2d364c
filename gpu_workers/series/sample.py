"""What one point of a queue reads: bounded whatever the queue's size.

Finished jobs of the window are counted with ZCOUNT on `completed` / `failed`
(scored by finishedOn) or taken from BullMQ's per-minute metrics where
workers keep them (those count jobs that retention already removed): the
larger. Wait (processedOn - timestamp - delay) and run (finishedOn -
processedOn) percentiles come from at most `sample` newest jobs of each set
that finished in the window (ZREVRANGEBYSCORE ... LIMIT, then one
`ops.job_fields` each: a member naming no job hash reads as a gone job).
The backlog (grouped waiting and delayed jobs included) and the oldest
waiting job are read as they are now, and so are the GROUPS_KEPT largest
group backlogs and every group's waiting jobs (a few reads however many
groups: the groups' index is scored by the turn each group drains at, and
the kept groups' counts come from one group_reads.lua call).
"""

from __future__ import annotations

from queues import codec, ops
from queues.drive import gather
from queues.groups import group_counts
from queues.keys import QueueKeys
from queues.metrics import MINUTE_MS, TARGETS, parse_metrics

from .points import GROUPS_KEPT, Point, percentile

_TIMES = ("timestamp", "delay", "processedOn", "finishedOn")


def _window_op(
    keys: QueueKeys, start_ms: int, end_ms: int, sample: int
) -> ops.Op[Point]:
    sets = (keys.completed, keys.failed)
    reply = yield [
        *(ops.Cmd(("ZCOUNT", k, start_ms, f"({end_ms}")) for k in sets),
        *(
            ops.Cmd(("ZREVRANGEBYSCORE", k, f"({end_ms}", start_ms, "LIMIT", 0, sample))
            for k in sets
        ),
        *(
            ops.Cmd(("HMGET", keys.metrics(t), "count", "prevTS", "prevCount"))
            for t in TARGETS
        ),
        ops.Cmd(("LLEN", keys.wait)),
        ops.Cmd(("LLEN", keys.paused)),
        ops.Cmd(("ZCARD", keys.prioritized)),
        ops.Cmd(("ZCARD", keys.delayed)),
        ops.Cmd(("LLEN", keys.active)),
        # The groups' index and totals (docs/groups.md).
        ops.Cmd(("ZREVRANGE", keys.groups_index, 0, GROUPS_KEPT - 1)),
        ops.grouped_waiting(keys),
        ops.Cmd(("ZCARD", keys.groups_delayed)),
    ]
    counted, ids, metas, backlog = reply[:2], reply[2:4], reply[4:6], reply[6:10]
    active, top_groups, grouped = reply[10], reply[11], reply[12]
    # Grouped jobs wait (and are delayed) in their groups' keys, not in the
    # lists above: the backlog counts them too, as get_counts does.
    grouped_waiting = sum(int(n) for n in grouped)
    grouped_backlog = grouped_waiting + int(reply[13])
    wanted = [i for found in ids for i in found]
    kept = [t for t, meta in zip(TARGETS, metas) if meta[0] is not None]
    top = [str(g) for g in top_groups or []]
    second = yield [
        *(ops.job_fields(keys, i, _TIMES) for i in wanted),
        *(ops.Cmd(("LRANGE", keys.metrics_data(t), 0, 1)) for t in kept),
        *([group_counts(keys, top, scan=0)] if top else []),
    ]
    rows = second[: len(wanted)]
    lists = dict(zip(kept, second[len(wanted) : len(wanted) + len(kept)]))
    finished = []
    for target, n, meta in zip(TARGETS, counted, metas):
        bullmq = parse_metrics(meta, lists.get(target, []))
        by_metrics = bullmq.per_bucket([start_ms], MINUTE_MS).get(start_ms)
        finished.append(max(int(n), by_metrics or 0))
    waits, runs = [], []
    for stamp, delay, started, ended in rows:
        created, begun = codec.to_int(stamp), codec.to_int(started)
        if created is None or begun is None:
            continue  # removed meanwhile, or failed before it started
        waits.append(max(begun - created - (codec.to_int(delay, 0) or 0), 0) / 1000)
        done = codec.to_int(ended)
        if done is not None:
            runs.append(max(done - begun, 0) / 1000)
    waits.sort()
    runs.sort()
    point: Point = {
        "t": start_ms,
        "m": 1,
        "c": finished[0],
        "f": finished[1],
        "n": len(waits),
        "w50": percentile(waits, 50),
        "w95": percentile(waits, 95),
        "r50": percentile(runs, 50),
        "r95": percentile(runs, 95),
        "b": sum(int(v) for v in backlog) + grouped_backlog,
        "a": int(active),
    }
    if top:
        counts = second[-1]
        point["g"] = {gid: int(c[0]) for gid, c in zip(top, counts)}
        point["gw"] = grouped_waiting
    return point


def queue_point_op(
    keys: QueueKeys, start_ms: int, end_ms: int, now_ms: int, sample: int
) -> ops.Op[Point]:
    """The point of one queue for [start_ms, end_ms), its backlog and oldest
    waiting job as of `now_ms`; two pipelined round trips (gather many)."""
    found, oldest = yield from gather(
        [_window_op(keys, start_ms, end_ms, sample), ops.oldest_waiting(keys)]
    )
    point: Point = found
    point["o"] = None if oldest is None else round(max(now_ms - oldest, 0) / 1000, 3)
    return point
