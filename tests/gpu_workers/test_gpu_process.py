"""One worker process per GPU serving every queue of that GPU (gpu_process.py):
one admission for the whole budget, one set of resident models, per-queue
slots, and the supervisor restarting a GPU's process when its queues change."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from gpu_workers.admission import VramAdmission
from gpu_workers.clock import now_ms
from gpu_workers.fleet import Fleet
from gpu_workers.gpu_process import GpuProcess
from gpu_workers.keys import BullpenKeys
from gpu_workers.probe import SimulatedProbe
from queues import Queue
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers models
from tests.gpu_workers.helpers import (
    LoopThread,
    SupervisorProcess,
    make_spec,
    read_stream,
    supervisor_config,
)
from tests.helpers import wait_until

GiB = 2**30
KEYS = BullpenKeys("bullpen")


class ProcessThread(LoopThread):
    """A GpuProcess built and run on an event loop in a daemon thread."""

    def __init__(self, specs: list[Any]) -> None:
        self.specs = specs
        self.probe = SimulatedProbe(specs[0].gpus, host=specs[0].host)
        super().__init__(lambda: GpuProcess(self.specs, self.probe), "process")

    @property
    def process(self) -> GpuProcess | None:
        """The GpuProcess (None until built)."""
        process: GpuProcess | None = self.target
        return process


@pytest.fixture
def queues(redis_url: str, qname: str) -> Iterator[tuple[Queue, Queue]]:
    a, b = Queue(qname, redis_url), Queue(qname + "-b", redis_url)
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def started() -> Iterator[list[ProcessThread]]:
    threads: list[ProcessThread] = []
    yield threads
    for t in threads:
        t.stop()


def shared_specs(redis_url: str, qa: Queue, qb: Queue, slots_b: int = 1) -> list[Any]:
    """Queues A (one slot) and B on one simulated GPU's 12 GiB process."""
    return [
        make_spec(redis_url, qa.name, slots=1, budget_bytes=12 * GiB),
        make_spec(redis_url, qb.name, slots=slots_b, budget_bytes=12 * GiB),
    ]


def done(q: Queue, *ids: str) -> list[Any] | None:
    jobs = [q.get_job(i) for i in ids]
    if all(j is not None and j.finished_on for j in jobs):
        return jobs
    return None


def loads(r: redis.Redis) -> list[str]:
    entries: Any = r.xrange(KEYS.model_events())
    return [f["model"] for _i, f in entries if f["kind"] == "load"]


def test_claims_of_every_queue_wait_while_any_job_waits_for_vram() -> None:
    """Two queues' views of one admission: each keeps its own slots, and no
    queue claims while a claimed job of the other is not admitted yet."""
    adm = VramAdmission(10 * GiB, 0, "g")
    a, b = adm.view(1), adm.view(2)
    held = {"a": 0, "b": 0}
    a.claimed = lambda: held["a"]
    b.claimed = lambda: held["b"]
    assert adm.slots == 3
    assert (a.capacity(0), b.capacity(0)) == (1, 1)
    held["a"] = 1  # a's job claimed, not admitted yet
    assert (a.capacity(1), b.capacity(0)) == (0, 0)
    adm.admitted[a.key("1")] = 4 * GiB  # admitted: the others may claim
    assert (a.capacity(1), b.capacity(0)) == (0, 1)
    held["b"] = 2
    adm.admitted[b.key("1")] = 6 * GiB  # same job id in the other queue
    adm.admitted[b.key("2")] = 0
    assert len(adm.admitted) == 3 and adm.free_bytes == 0
    assert b.capacity(2) == 0
    b.resize(3)
    assert adm.slots == 4 and b.capacity(2) == 0  # no free budget
    del adm.admitted[b.key("2")]
    adm.admitted.pop(b.key("1"))
    held["b"] = 0
    assert b.capacity(0) == 1


def test_a_queue_held_back_by_another_is_woken_when_that_job_leaves() -> None:
    """A claimed job of queue A counts as waiting for budget until admitted,
    and again once released while its worker finishes it: B's capacity() is
    0 then. Only A's worker is told when the job leaves, so A's next
    capacity() wakes B (once); two queues held by a third never wake each
    other in turn."""
    adm = VramAdmission(10 * GiB, 0, "g")
    a, b, c = adm.view(1), adm.view(1), adm.view(1)
    held = {"a": 0, "b": 0, "c": 0}
    woken = {"a": 0, "b": 0, "c": 0}
    for name, view in (("a", a), ("b", b), ("c", c)):
        view.claimed = lambda name=name: held[name]
        view.bind(lambda name=name: woken.__setitem__(name, woken[name] + 1))
    held["a"] = 1  # a's job, released, not left yet
    assert b.capacity(0) == 0
    assert a.capacity(1) == 0 and woken["b"] == 0  # still a's
    held["a"] = 0  # it left: a's worker re-asks
    assert a.capacity(0) == 1
    assert woken == {"a": 0, "b": 1, "c": 0}
    assert a.capacity(0) == 1 and woken["b"] == 1  # once
    assert b.capacity(0) == 1
    held["c"] = 1  # c's job waits: a and b are held by it
    assert (a.capacity(0), b.capacity(0)) == (0, 0)
    for _ in range(3):
        assert (a.capacity(0), b.capacity(0)) == (0, 0)
    assert woken == {"a": 0, "b": 1, "c": 0}, "a and b woke each other"
    held["c"] = 0
    assert c.capacity(0) == 1
    assert woken == {"a": 1, "b": 2, "c": 0}


def test_a_queue_claims_at_once_after_the_other_queues_job(
    redis_url: str, queues: tuple[Queue, Queue], started: list[ProcessThread]
) -> None:
    """One GPU process serving queues A and B, a job on A, then one on B, in
    turn: each of B's jobs runs at once, not after B's 60 s drain delay (B
    was left asleep, held back by A's job while it was being finished)."""
    qa, qb = queues
    started.append(ProcessThread(shared_specs(redis_url, qa, qb)))
    data = {"model": "t-mid", "working": "1GiB", "s": 0.05}
    for _ in range(3):
        a = qa.add("test.model", data)
        wait_until(lambda a=a: done(qa, a.id), timeout=30, what="queue A's job")
        b = qb.add("test.model", data)
        wait_until(lambda b=b: done(qb, b.id), timeout=20, what="queue B's job")


def test_a_queue_whose_slots_are_full_is_not_open_for_its_models(
    redis_url: str,
    queues: tuple[Queue, Queue],
    r: redis.Redis,
    started: list[ProcessThread],
) -> None:
    """Queues A and B, one slot each, on one GPU's process with t-mid
    resident: while a B job runs the GPU is open for t-mid to queue A only
    (a free slot of the process is A's: other GPUs holding B's t-mid jobs for
    it would wait for nothing), and open to B again once that job ends."""
    qa, qb = queues
    specs = shared_specs(redis_url, qa, qb)
    started.append(ProcessThread(specs))
    gpu = specs[0].gpu_uuid
    member_a, member_b = f"{gpu}|bull:{qa.name}", f"{gpu}|bull:{qb.name}"

    def open_to() -> set[str]:
        return set(r.zrangebyscore(KEYS.model_open("t-mid"), now_ms(), "+inf"))

    first = qa.add("test.model", {"model": "t-mid", "working": "1GiB", "s": 0.05})
    wait_until(lambda: done(qa, first.id), timeout=30, what="the load")
    wait_until(lambda: open_to() >= {member_a, member_b}, what="open to both")
    long = qb.add("test.model", {"model": "t-mid", "working": "1GiB", "s": 3})
    wait_until(
        lambda: (job := qb.get_job(long.id)) is not None and job.processed_on,
        what="B's job to start",
    )
    wait_until(lambda: member_b not in open_to(), what="B no longer open")
    assert member_a in open_to()
    assert not done(qb, long.id)
    wait_until(lambda: done(qb, long.id), timeout=30, what="B's job")
    wait_until(lambda: open_to() >= {member_a, member_b}, what="open to both again")


def test_two_queues_share_one_budget_and_one_resident_model(
    redis_url: str,
    queues: tuple[Queue, Queue],
    r: redis.Redis,
    started: list[ProcessThread],
) -> None:
    """A model loaded for queue A's job serves queue B's jobs with no second
    load; both queues' jobs run under one budget (never over it), each queue
    within its own slots, and both records name the one process."""
    qa, qb = queues
    t = ProcessThread(shared_specs(redis_url, qa, qb, slots_b=2))
    started.append(t)
    first = qa.add("test.model", {"model": "t-mid", "working": "1GiB", "s": 0.05})
    wait_until(lambda: done(qa, first.id), what="queue A's job")
    ids_a = [
        qa.add("test.model", {"model": "t-mid", "working": "2GiB", "s": 0.2}).id
        for _ in range(3)
    ]
    ids_b = [
        qb.add("test.model", {"model": "t-mid", "working": "2GiB", "s": 0.2}).id
        for _ in range(6)
    ]
    jobs = wait_until(lambda: done(qb, *ids_b), timeout=30, what="queue B's jobs")
    assert wait_until(lambda: done(qa, *ids_a), timeout=30, what="queue A's jobs")
    assert jobs is not None
    assert [j.returnvalue for j in jobs] == [{"model": "t-mid"}] * 6
    assert loads(r) == ["t-mid"]
    proc = t.process
    assert proc is not None
    assert proc.admission.budget_bytes == 12 * GiB
    assert 6 * GiB + 2 * 2 * GiB <= proc.admission.max_committed_bytes <= 12 * GiB
    beats = read_stream(r)
    by_queue: dict[str, list[dict[str, Any]]] = {qa.name: [], qb.name: []}
    for beat in beats:
        by_queue[beat["queue"]].append(beat)
        assert beat["committed_bytes"] <= beat["budget_bytes"] == 12 * GiB
        assert beat["process"]["queues"] == [f"bull:{qa.name}", f"bull:{qb.name}"]
    assert all(len(b["running"]) <= 1 for b in by_queue[qa.name])
    assert all(len(b["running"]) <= 2 for b in by_queue[qb.name])
    assert any(len(b["running"]) == 2 for b in by_queue[qb.name])
    pids = {b["pid"] for b in beats} | {b["process"]["pid"] for b in beats}
    assert len(pids) == 1


def test_the_supervisor_runs_one_process_per_gpu_and_restarts_it_on_a_new_set(
    redis_url: str,
    queues: tuple[Queue, Queue],
    fleet: Fleet,
    tmp_path: Path,
) -> None:
    """Two queues on one simulated GPU: one process (the same pid in both
    worker records and both host-record children), each with the GPU's whole
    budget. Scaling queue B off the GPU restarts the GPU's process without B,
    and queue A keeps working."""
    qa, qb = queues
    config = supervisor_config(
        redis_url,
        [{"queue": qa.name, "slots": 2}, {"queue": qb.name, "vram_share": 0.25}],
        "h1",
        log_dir=str(tmp_path / "logs"),
    )
    sup = SupervisorProcess(config, tmp_path / "supervisor.log")
    try:

        def listed(n: int) -> list[dict[str, Any]] | None:
            ws = fleet.list_workers()
            return ws if len(ws) == n else None

        workers = wait_until(lambda: listed(2), what="two worker records")
        assert workers is not None
        assert len({w["pid"] for w in workers}) == 1
        assert {w["budget_bytes"] for w in workers} == {int(21.5 * GiB)}
        assert {w["slots"] for w in workers} == {2, 3}
        [host] = fleet.list_hosts()
        assert [c["pid"] for c in host["children"]] == [workers[0]["pid"]] * 2
        old = workers[0]["pid"]
        fleet.set_desired("h1", qb.name, workers=0)

        def restarted() -> list[dict[str, Any]] | None:
            ws = listed(1)
            if ws and ws[0]["queue"] == qa.name and ws[0]["pid"] != old:
                return ws
            return None

        after = wait_until(
            restarted, timeout=15, what="the GPU's process restarted without B"
        )
        assert after is not None
        assert after[0]["process"]["queues"] == [f"bull:{qa.name}"]
        job = qa.add("demo", {"vram": "4GiB", "steps": 1, "step_s": 0.01})
        wait_until(lambda: done(qa, job.id), timeout=15, what="queue A's job")
        assert sup.terminate() == 0
    finally:
        sup.close()
        print(sup.log())


def test_process_per_gpu_off_runs_a_process_per_queue_with_shares(
    redis_url: str,
    queues: tuple[Queue, Queue],
    fleet: Fleet,
    tmp_path: Path,
) -> None:
    """With process_per_gpu off, today's behaviour: each (queue, GPU) its own
    process, with its vram_share of the GPU's budget (one context each)."""
    qa, qb = queues
    config = supervisor_config(
        redis_url,
        [{"queue": qa.name}, {"queue": qb.name, "vram_share": 0.25}],
        "h1",
        process_per_gpu=False,
        log_dir=str(tmp_path / "logs"),
    )
    sup = SupervisorProcess(config, tmp_path / "supervisor.log")
    try:

        def two() -> list[dict[str, Any]] | None:
            ws = fleet.list_workers()
            return ws if len(ws) == 2 and all(w["pid"] for w in ws) else None

        workers = wait_until(two, what="two worker records")
        assert workers is not None
        assert len({w["pid"] for w in workers}) == 2
        assert all("process" not in w for w in workers)
        usable = 24 * GiB - GiB - GiB - 2 * (GiB // 2)  # two CUDA contexts
        budgets = {w["queue"]: w["budget_bytes"] for w in workers}
        assert budgets == {qa.name: int(usable * 0.75), qb.name: int(usable * 0.25)}
        assert sup.terminate() == 0
    finally:
        sup.close()
