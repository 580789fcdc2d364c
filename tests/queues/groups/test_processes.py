"""Group limits across several worker processes (docs/groups.md): per-group
concurrency is never exceeded, as sampled from Redis and as the runs the
processes recorded show; a group's rate limit holds in every window of the
limiter, as Redis's own clock stamps the claims."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from queues import Queue
from queues.group_types import group_active_count
from tests.faults import grouped, harness
from tests.helpers import CLAIM_CLOCK_SLACK_MS, wait_until

PROCESSES = 4
SLOTS = 8  # per process: 32 slots for 20 groups, so caps bind


@pytest.fixture
def workers(redis_url: str, qname: str, tmp_path: Path) -> Iterator[harness.Workers]:
    """4 `python -m queues worker` processes running the recording processor."""
    w = harness.Workers(
        redis_url, qname, tmp_path, PROCESSES, grouped.PROCESSOR, concurrency=SLOTS
    )
    try:
        w.wait_ready(redis_url, qname)
        yield w
    finally:
        w.stop()


class Sampler:
    """A thread reading every group's active count (`groups:active`) in one
    round trip every few ms; the most seen per group."""

    def __init__(self, url: str, q: Queue, groups: list[str]) -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.key = q.keys.groups_active
        self.groups = groups
        self.peak = dict.fromkeys(groups, 0)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for g, a in zip(self.groups, self.client.hmget(self.key, self.groups)):
                self.peak[g] = max(self.peak[g], group_active_count(a))
            self.samples += 1
            self._stop.wait(0.003)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(10)
        self.client.close()
        return self.peak


def _completed(q: Queue, n: int) -> bool:
    return q.get_counts("completed")["completed"] >= n


def test_group_concurrency_holds_across_processes(
    q: Queue, redis_url: str, qname: str, workers: harness.Workers
) -> None:
    """20 groups, 20 jobs of 100 ms each, 4 processes of 8 slots: default
    cap 2, `solo` capped at 1, `wide` at 4 (weight 4). No group ever has more
    active than its cap, in Redis (`a`, sampled) or in the runs the processes
    recorded (their intervals' largest overlap); every job ran once, and the
    group keys end clean."""
    caps = {f"g{i}": 2 for i in range(18)} | {"solo": 1, "wide": 4}
    q.set_group_defaults(concurrency=2)
    q.set_group("solo", concurrency=1)
    q.set_group("wide", concurrency=4, weight=4)
    sampler = Sampler(redis_url, q, list(caps))
    jobs = [
        {"name": "j", "data": {"ms": 100, "g": g}, "opts": {"group": g}}
        for _ in range(20)
        for g in caps
    ]
    q.add_bulk(jobs)
    try:
        wait_until(lambda: _completed(q, len(jobs)), 60, 0.05, what="every job")
    finally:
        sampled = sampler.stop()
    assert workers.exited() == [], workers.log_text()
    assert workers.stop() == [0] * PROCESSES, workers.log_text()
    runs = grouped.read_runs(redis_url, qname)
    assert len(runs) == len(jobs)
    assert all(r.end is not None for r in runs)
    assert sampler.samples > 10
    over = {g: (sampled[g], caps[g]) for g in caps if sampled[g] > caps[g]}
    assert over == {}, "sampled active over the cap"
    peaks = grouped.group_peaks(runs)
    over = {g: (peaks[g], caps[g]) for g in caps if peaks[g] > caps[g]}
    assert over == {}, "recorded runs over the cap"
    # 32 busy slots over 20 groups: some group ran 2 at once (the caps bound).
    assert max(peaks.values()) >= 2
    assert grouped.concurrent_reruns(runs) == []
    assert grouped.group_problems(redis_url, qname) == []


def _claims(r: redis.Redis, q: Queue) -> dict[str, list[int]]:
    """Group -> the ms (Redis's clock: the stream id of each `active`
    event, written by the claim script that counted the start in the
    group's limiter) of each claim of its jobs."""
    by_group: dict[str, list[int]] = {}
    for entry_id, fields in r.xrange(q.keys.events, "-", "+"):
        if fields.get("event") == "active":
            gid = r.hget(q.keys.base + fields["jobId"], "gid")
            by_group.setdefault(gid, []).append(int(entry_id.split("-")[0]))
    return by_group


def _windows(claims: list[int], duration_ms: int) -> list[int]:
    """Claims per limiter window, the windows as the limiter makes them: one
    opens at a claim when none is open and lasts `duration_ms`. Redis expires
    the limiter key when its clock passes the window's end; the window here
    is CLAIM_CLOCK_SLACK_MS shorter, for how far a claim's stream id may
    trail its count in the limiter (the same clock: no skew between
    processes enters)."""
    counts: list[int] = []
    end = None
    for ms in sorted(claims):
        if end is None or ms >= end:
            counts.append(0)
            end = ms + duration_ms - CLAIM_CLOCK_SLACK_MS
        counts[-1] += 1
    return counts


def test_group_rate_limit_holds_across_processes(
    q: Queue, r: redis.Redis, redis_url: str, qname: str, workers: harness.Workers
) -> None:
    """4 groups at 3 starts per 600 ms (the defaults) and `own` at 5 per
    400 ms, 12 instant jobs each, 4 processes: every limiter window holds
    at most the group's rate_max claims, so 12 jobs span at least 3 windows
    (4 for 3 per window); every job ran once."""
    limits = {f"r{i}": (3, 600) for i in range(4)} | {"own": (5, 400)}
    q.set_group_defaults(rate_max=3, rate_duration_ms=600)
    q.set_group("own", rate_max=5, rate_duration_ms=400)
    jobs = [
        {"name": "j", "data": {"ms": 0, "g": g}, "opts": {"group": g}}
        for _ in range(12)
        for g in limits
    ]
    q.add_bulk(jobs)
    wait_until(lambda: _completed(q, len(jobs)), 60, 0.05, what="every job")
    assert workers.stop() == [0] * PROCESSES, workers.log_text()
    claims = _claims(r, q)
    assert sorted(claims) == sorted(limits)
    for g, (rate_max, duration) in limits.items():
        assert len(claims[g]) == 12
        windows = _windows(claims[g], duration)
        assert max(windows) <= rate_max, (g, windows)
        # 12 claims at rate_max a window need ceil(12 / rate_max) windows.
        full = -(-12 // rate_max) - 1
        assert (
            max(claims[g]) - min(claims[g]) >= full * duration - CLAIM_CLOCK_SLACK_MS
        ), g
    runs = grouped.read_runs(redis_url, qname)
    assert len(runs) == len(jobs)
    assert grouped.group_problems(redis_url, qname) == []
