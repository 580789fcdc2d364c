"""The sampler: one point per queue and per GPU each minute, cluster-wide.

Every supervisor (its own queues and its own host's GPUs, read by key: it
never lists the fleet) and every dashboard process (every queue it
discovers) runs `tick()` every few seconds. A tick samples the minute that
ended last, once its settle time passed; whoever first claims a series'
minute (SET NX EX on its claim key) samples it, the others skip it, so any
number of samplers write one point per minute and none counts twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from queues import codec
from queues.connection import sync_client
from queues.drive import gather, run_sync
from queues.keys import QueueKeys
from queues.metrics import MINUTE_MS

from .. import defaults
from ..clock import now_ms as clock_ms
from ..fleet import Fleet
from ..fleet_snapshot import join_gpus
from ..keys import BullpenKeys
from . import points, store
from .sample import queue_point_op

log = logging.getLogger("gpu_workers.series")


def last_minute(now_ms: int) -> int:
    """Start (ms) of the newest minute that is over and settled."""
    settled = now_ms - defaults.SERIES_SETTLE_MS
    return settled - settled % MINUTE_MS - MINUTE_MS


def gpu_point(gpu: dict[str, Any], minute_ms: int) -> points.Point:
    """A GPU's reading (Fleet.list_gpus row) as a point of `minute_ms`."""

    def num(name: str) -> float | None:
        value = gpu.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)

    return {
        "t": minute_ms,
        "m": 1,
        "u": num("utilization_gpu_pct"),
        "mu": num("memory_used_bytes"),
        "c": num("committed_bytes"),
        "bu": num("budget_bytes"),
        "tot": num("memory_total_bytes"),
    }


class SeriesSampler:
    """Samples queues and GPUs into Bullpen's series (keys.py, store.py)."""

    def __init__(
        self,
        connection: Any,
        namespace: str = defaults.NAMESPACE,
        sample_jobs: int = defaults.SERIES_SAMPLE_JOBS,
        host: str | None = None,
    ) -> None:
        # A decoding client (replies are str), the given one when it decodes.
        self.client: Any = sync_client(connection)
        self.keys = BullpenKeys(namespace)
        self.sample_jobs = sample_jobs
        #: A supervisor's host: only its GPUs are sampled (None: every GPU).
        self.host = host
        #: The minute whose GPU claims this (host's) sampler tried last: its
        #: records are read once per minute, not every tick.
        self._gpu_minute: int | None = None
        #: GPU uuid -> the info last written to series:gpu-info.
        self._info: dict[str, str] = {}
        #: Claim keys this sampler tried, by minute: a tick every few seconds
        #: sees the same minute again, and a claim lost (or won) stays so.
        self._tried: dict[str, int] = {}

    def _claim(self, names: list[str], minute: int) -> list[bool]:
        """Which of the minute's claim keys this sampler wins (SET NX); keys
        it tried before answer False without a round trip."""
        old = minute - 2 * MINUTE_MS
        self._tried = {k: m for k, m in self._tried.items() if m >= old}
        fresh = [n for n in names if n not in self._tried]
        if not fresh:
            return [False] * len(names)
        pipe = self.client.pipeline(transaction=False)
        for name in fresh:
            pipe.set(name, "1", nx=True, ex=defaults.SERIES_CLAIM_TTL_S)
        won = {n: bool(r) for n, r in zip(fresh, pipe.execute())}
        self._tried.update(dict.fromkeys(fresh, minute))
        return [won.get(n, False) for n in names]

    def tick(
        self,
        queues: Iterable[tuple[str, str]],
        gpus: bool = True,
        now_ms: int | None = None,
    ) -> int:
        """Sample the last settled minute of each (prefix, queue) and, with
        `gpus`, of every live GPU, where no other sampler did; points written."""
        now = now_ms if now_ms is not None else clock_ms()
        minute = last_minute(now)
        refs = sorted(set(queues))
        claims = self._claim(
            [self.keys.series_claim(p, q, minute) for p, q in refs], minute
        )
        mine = [ref for ref, won in zip(refs, claims) if won]
        written = 0
        if mine:
            found = run_sync(
                gather(
                    [
                        queue_point_op(
                            QueueKeys(q, p),
                            minute,
                            minute + MINUTE_MS,
                            now,
                            self.sample_jobs,
                        )
                        for p, q in mine
                    ]
                ),
                self.client,
            )
            store.write(
                self.client,
                [
                    (self._queue_key_of(p, q), point)
                    for (p, q), point in zip(mine, found)
                ],
                points.over_time,
                now,
            )
            written += len(mine)
        if gpus:
            written += self._tick_gpus(minute, now)
        return written

    def tick_overall(
        self, queues: Iterable[tuple[str, str]], now_ms: int | None = None
    ) -> bool:
        """Combine the queues' points of the minute before the last settled
        one (every sampler has written its points of it by then) into the
        overall series, unless another sampler did; True when written.
        `queues` is every queue there is (a dashboard's discovery), so a
        supervisor, which knows only its own, never calls this."""
        now = now_ms if now_ms is not None else clock_ms()
        minute = last_minute(now) - MINUTE_MS
        refs = sorted(set(queues))
        claim = [self.keys.series_overall_claim(minute)]
        if not refs or not self._claim(claim, minute)[0]:
            return False
        level = store.LEVEL_NAMES[0]
        found = store.read(
            self.client,
            [self.keys.series(p, q, level) for p, q in refs],
            minute,
            minute + MINUTE_MS,
        )
        parts = [series[-1] for series in found if series]
        if not parts:
            return False
        point = points.over_queues(parts, minute)
        store.write(
            self.client, [(self.keys.series_overall, point)], points.over_time, now
        )
        return True

    def _queue_key_of(self, prefix: str, queue: str) -> store.KeyOf:
        return lambda level: self.keys.series(prefix, queue, level)

    def _gpu_key_of(self, uuid: str) -> store.KeyOf:
        return lambda level: self.keys.gpu_series(uuid, level)

    def host_gpus(self, host: str) -> list[dict[str, Any]]:
        """One host's GPUs as Fleet.list_gpus rows (without `oom_total`),
        from its host record and its children's worker records, by key."""
        try:
            record = codec.loads(self.client.get(self.keys.host(host)) or "null")
        except (codec.JSONDecodeError, TypeError, ValueError):
            return []
        if not isinstance(record, dict):
            return []
        ids = [
            c["id"]
            for c in record.get("children") or []
            if isinstance(c, dict) and isinstance(c.get("id"), str)
        ]
        workers = []
        if ids:
            pipe = self.client.pipeline(transaction=False)
            for wid in ids:
                pipe.get(self.keys.worker(wid))
            for raw in pipe.execute():
                try:
                    w = codec.loads(raw) if raw else None
                except (codec.JSONDecodeError, TypeError, ValueError):
                    continue
                if isinstance(w, dict) and w.get("host") == host:
                    workers.append(w)
        # The fleet snapshot's join, on this one host (its oom_total left out:
        # a point does not carry it).
        rows = join_gpus([record], workers, {})
        for row in rows:
            row.pop("oom_total", None)
        return rows

    def _tick_gpus(self, minute: int, now: int) -> int:
        if self.host is not None:
            if self._gpu_minute == minute:
                return 0
            self._gpu_minute = minute
        found = (
            self.host_gpus(self.host)
            if self.host is not None
            else Fleet(self.client, self.keys.ns).list_gpus()
        )
        rows = [g for g in found if isinstance(g.get("uuid"), str)]
        claims = self._claim(
            [self.keys.gpu_series_claim(g["uuid"], minute) for g in rows], minute
        )
        mine = [g for g, won in zip(rows, claims) if won]
        if not mine:
            return 0
        pipe = self.client.pipeline(transaction=False)
        keep = store.LEVELS[store.LEVEL_NAMES[-1]][1]
        for g in mine:
            pipe.zadd(self.keys.series_gpus(), {g["uuid"]: minute})
            info = points.dump({k: g.get(k) for k in ("host", "index", "name")})
            if self._info.get(g["uuid"]) != info:  # written once, then on change
                pipe.hset(self.keys.series_gpu_info(), g["uuid"], info)
                self._info[g["uuid"]] = info
        pipe.zremrangebyscore(self.keys.series_gpus(), "-inf", f"({now - keep}")
        pipe.execute()
        store.write(
            self.client,
            [(self._gpu_key_of(g["uuid"]), gpu_point(g, minute)) for g in mine],
            points.gpu_over_time,
            now,
        )
        return len(mine)

    def tick_quietly(
        self,
        queues: Iterable[tuple[str, str]],
        gpus: bool | None = None,
        overall: bool = False,
    ) -> int:
        """`tick()` (and with `overall`, `tick_overall()` over the same
        queues), logging instead of raising (a sampler's loop must go on).
        GPUs by default only where this sampler has a host: each supervisor
        samples its own, and a dashboard's loop never walks the fleet."""
        refs = list(queues)
        if gpus is None:
            gpus = self.host is not None
        try:
            written = self.tick(refs, gpus)
            if overall:
                written += int(self.tick_overall(refs))
            return written
        except Exception as exc:  # noqa: BLE001 - Redis away, read-only, full...
            log.warning("sampling the charts' series failed: %r", exc)
            return 0
