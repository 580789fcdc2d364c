"""Interop with model jobs (issue 24): Node BullMQ producers add jobs naming
models; a real Bullpen supervisor (one worker process per simulated GPU,
claim-time placement on) runs them; what Node and bull-board read stays
right: counts, the worker list, each job's return value, timestamps and
attempts. Placement only reorders `wait`, so a Node Worker can share the
queue. Malformed jobs from Node fail with a clear reason and the GPU
workers keep going.

bull-board is not installed here (tests/interop/package.json pins BullMQ
and ioredis only), so its views are checked through what it reads: Node's
getJobCounts(), getJobs(state, ...) per state, getJob / Job.fromId, and
isPaused()."""

from __future__ import annotations

import base64
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from queues import Queue
from tests.gpu_workers.helpers import SupervisorProcess, supervisor_config
from tests.helpers import wait_until

from .helpers import BULL, Process, call, node, node_worker, redis_arg

MODELS = ("t-small", "t-mid", "t-big")
#: Node's getJobCounts() keys (BullMQ 6.7.0).
STATES = tuple("active completed delayed failed prioritized waiting".split())
STATES += ("waiting-children",)
#: Job slots per GPU worker (so at most 2 x SLOTS jobs are active at once).
SLOTS = 3
#: The index of model_jobs' long job.
LONG = 3
Start = Callable[..., SupervisorProcess]


@pytest.fixture
def supervise(redis_url: str, qname: str, tmp_path: Path) -> Iterator[Start]:
    """Start a supervisor on two simulated 24 GiB GPUs serving the test queue
    and any `more` (one process per GPU, placement on: the defaults);
    SIGKILLed with its workers at teardown, its logs printed on failure."""
    started: list[SupervisorProcess] = []

    def start(*more: str) -> SupervisorProcess:
        queues = [{"queue": name, "slots": SLOTS} for name in (qname, *more)]
        config = supervisor_config(redis_url, queues, "h1", "sim:2x24GiB")
        config["log_dir"] = str(tmp_path / "logs")
        proc = SupervisorProcess(config, tmp_path / "supervisor.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.close()
        print(f"--- supervisor log:\n{proc.log()[-6000:]}")
        for path in sorted((tmp_path / "logs").glob("*.log")):
            print(f"--- {path.name}:\n{path.read_text(errors='replace')[-4000:]}")


def gpu_names(qname: str) -> list[str]:
    """The Bullpen worker names on the two GPUs (BullMQ's processedBy)."""
    return [f"h1.{qname}.gpu{i}" for i in (0, 1)]


def node_workers(redis_url: str, qname: str, count: int) -> list[dict[str, Any]]:
    """Node's getWorkers() once it lists `count` clients."""

    def listed() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = call(redis_url, qname, "getWorkers")
        return found if len(found) == count else []

    return wait_until(
        listed,
        60,
        interval=0.2,
        what=f"Node's getWorkers() to list {count} workers",
    )


def raw_names(qname: str, names: list[str]) -> list[str]:
    """The CLIENT SETNAME of named BullMQ workers of the queue."""
    encoded = base64.b64encode(qname.encode()).decode()
    return sorted(f"bull:{encoded}:w:{n}" for n in names)


def counts(redis_url: str, qname: str) -> dict[str, int]:
    """Node's getJobCounts()."""
    found: dict[str, int] = call(redis_url, qname, "getJobCounts")
    return found


def py_counts(queue: Queue) -> dict[str, int]:
    """Bullpen's counts of the same states (its `wait` is Node's waiting)."""
    return queue.get_counts(*STATES)


def node_watch(redis_url: str, qname: str) -> Process:
    """A Node process printing getJobs(['active']) and getJobCounts() every
    20 ms (node/bull.mjs watch)."""
    proc = Process(
        ["node", str(BULL), redis_arg(redis_url), "watch", qname, "20"], "node watch"
    )
    proc.wait_for("ready")
    return proc


def active_ids(line: dict[str, Any]) -> set[str]:
    """The ids of the active jobs of a watch line."""
    return {job["id"] for job in line["active"] if job}


def model_jobs(count: int) -> list[dict[str, Any]]:
    """`count` test.model jobs in Node's addBulk form: models in turn, every
    fourth prioritized, every fifth delayed, the seventh with attempts 2;
    job LONG (plain, t-small) holds its GPU 2 s, the others 50 ms."""
    jobs = []
    for i in range(count):
        opts: dict[str, Any] = {}
        if i % 4 == 1:
            opts["priority"] = 1 + i % 3
        elif i % 5 == 2:
            opts["delay"] = 300
        if i == 7:
            opts["attempts"] = 2
        s = 2.0 if i == LONG else 0.05
        data = {"model": MODELS[i % 3], "working": "1GiB", "s": s, "n": i}
        jobs.append({"name": "test.model", "data": data, "opts": opts})
    return jobs


def stable_counts(redis_url: str, qname: str, queue: Queue) -> dict[str, int] | None:
    """Node's counts when Bullpen's, read between two equal Node reads, match
    them (else None: a job moved meanwhile). Jobs only move forward (delayed
    -> waiting -> active -> completed), so two equal Node reads mean nothing
    moved between them."""
    first = counts(redis_url, qname)
    ours = py_counts(queue)
    if counts(redis_url, qname) != first:
        return None
    assert ours == first, (ours, first)
    return first


def test_node_model_jobs_run_on_bullpen_gpus(
    redis_url: str, qname: str, supervise: Start
) -> None:
    """30 test.model jobs from a Node producer (three models, some
    prioritized, some delayed, one with attempts 2) on a supervisor with two
    simulated GPUs, each GPU's process serving a second queue too: Node's
    getWorkers() lists one named worker per GPU on each queue; with
    the queue paused Node and Bullpen count the same known layout; while the
    jobs run every Node count accounts for all 30 jobs; at the end all 30
    completed once, and Node reads each one's return value {model}, who ran
    it, its timestamps and attempts, as bull-board would."""
    total, other = 30, qname + "-b"
    queue = Queue(qname, redis_url)
    supervise(other)
    listed = node_workers(redis_url, qname, 2)
    assert sorted(w["rawname"] for w in listed) == raw_names(qname, gpu_names(qname))
    assert {w["name"] for w in listed} == {qname}
    listed_b = node_workers(redis_url, other, 2)
    assert sorted(w["rawname"] for w in listed_b) == raw_names(other, gpu_names(other))
    assert len({w["id"] for w in listed + listed_b}) == 4, "one connection each"

    call(redis_url, qname, "pause")
    specs = model_jobs(total)
    added = call(redis_url, qname, "addBulk", specs)
    ids = [job["id"] for job in added]
    assert len(set(ids)) == total
    prioritized = sum(1 for s in specs if s["opts"].get("priority"))
    delayed = sum(1 for s in specs if s["opts"].get("delay"))
    paused = wait_until(
        lambda: stable_counts(redis_url, qname, queue),
        30,
        what="Node and Bullpen to agree on the paused queue",
    )
    assert paused is not None
    # Paused, nothing is claimed; delayed jobs may be promoted meanwhile.
    assert paused["prioritized"] == prioritized
    assert paused["delayed"] <= delayed
    assert paused["waiting"] + paused["delayed"] == total - prioritized
    assert sum(paused.values()) == total
    assert call(redis_url, qname, "isPaused") is True

    watcher = node_watch(redis_url, qname)
    call(redis_url, qname, "resume")
    # A Node view of the long job while it runs (it holds its GPU 2 s).
    wait_until(
        lambda: any(ids[LONG] in active_ids(ln) for ln in watcher.seen("counts")),
        30,
        what="Node to list the long job as active",
    )
    wait_until(
        lambda: any(
            ln["counts"]["completed"] == total for ln in watcher.seen("counts")
        ),
        90,
        what="Node to count every model job completed",
    )
    watcher.stop()
    samples = watcher.seen("counts")
    for line in samples:
        sample = line["counts"]
        assert sum(sample.values()) == total, sample
        assert sample["failed"] == 0 and sample["waiting-children"] == 0, sample
        assert sample["active"] <= 2 * SLOTS, sample
        # getJobCounts and getJobs are two reads: jobs may start or end between
        assert len(line["active"]) <= 2 * SLOTS, line
        for job in line["active"]:
            assert job is None or job["processedBy"] in gpu_names(qname), line
    done = [ln["counts"]["completed"] for ln in samples]
    assert done == sorted(done), "Node saw the completed count go down"
    final = dict.fromkeys(STATES, 0) | {"completed": total}
    assert stable_counts(redis_url, qname, queue) == final

    jobs = node(redis_url, "read", qname, ids)
    for spec, job in zip(specs, jobs, strict=True):
        data, opts = spec["data"], spec["opts"]
        assert job["data"] == data and job["name"] == "test.model"
        assert job["returnvalue"] == {"model": data["model"]}, job
        assert (job["attemptsMade"], job["attemptsStarted"]) == (1, 1), job
        assert job["processedBy"] in gpu_names(qname), job
        assert job.get("failedReason") is None, job
        # processedOn is the claim; the handler then holds its job >= 50 ms
        assert job["finishedOn"] >= job["processedOn"] + 50, job
        assert job["processedOn"] >= job["timestamp"] + opts.get("delay", 0), job
        # BullMQ's Job writes attempts 0 when none is given
        assert job["opts"]["attempts"] == opts.get("attempts", 0), job
        assert job["priority"] == opts.get("priority", 0), job

    # bull-board's lists: every job under completed, none anywhere else
    listed_done = call(redis_url, qname, "getJobs", ["completed"], 0, -1)
    assert sorted(j["id"] for j in listed_done) == sorted(ids)
    others = [s for s in STATES if s != "completed"]
    assert call(redis_url, qname, "getJobs", others, 0, -1) == []
    again = node_workers(redis_url, qname, 2)
    assert sorted(w["id"] for w in again) == sorted(w["id"] for w in listed)
    # the second queue's workers run a job on the models of the same processes
    b = call(redis_url, other, "add", "test.model", {"model": "t-mid", "s": 0.05})
    wait_until(
        lambda: node(redis_url, "read", other, [b["id"]])[0].get("finishedOn"),
        30,
        interval=0.2,
        what="the second queue's job",
    )
    (job,) = node(redis_url, "read", other, [b["id"]])
    assert job["returnvalue"] == {"model": "t-mid"} and job["attemptsMade"] == 1
    assert job["processedBy"] in gpu_names(other), job
    queue.close()


def test_node_worker_alongside_bullpen_gpu_workers(
    redis_url: str, qname: str, supervise: Start
) -> None:
    """A Node BullMQ Worker on the same queue as the two GPU workers
    (placement reorders `wait` only): Node's getWorkers() lists all three,
    both sides take jobs, each of the 60 jobs runs exactly once and is read
    back by Node with the return value of whoever ran it, and Node's and
    Bullpen's counts agree."""
    total = 60
    queue = Queue(qname, redis_url)
    supervise()
    node_workers(redis_url, qname, 2)
    worker = node_worker(redis_url, qname, name="node", concurrency=2)
    watcher = node_watch(redis_url, qname)
    try:
        listed = node_workers(redis_url, qname, 3)
        assert sorted(w["rawname"] for w in listed) == raw_names(
            qname, [*gpu_names(qname), "node"]
        )
        specs = model_jobs(total)
        for spec in specs:
            spec["data"]["sleepMs"] = 50  # what the Node worker does with a job
            spec["opts"].pop("delay", None)
        added = call(redis_url, qname, "addBulk", specs)
        ids = [job["id"] for job in added]
        wait_until(
            lambda: counts(redis_url, qname)["completed"] == total,
            90,
            interval=0.2,
            what="both sides to complete every job",
        )
    finally:
        worker.stop()
        watcher.stop()
    assert worker.seen("failed") == [] and worker.seen("error") == []
    for line in watcher.seen("counts"):
        assert sum(line["counts"].values()) in (0, total), line  # 0: before the add
        assert line["counts"]["active"] <= 2 * SLOTS + 2, line
    node_starts = Counter(ln["start"] for ln in worker.seen("start"))
    assert set(node_starts.values()) <= {1}, "the Node worker ran a job twice"
    jobs = node(redis_url, "read", qname, ids)
    by: Counter[str] = Counter()
    for spec, job in zip(specs, jobs, strict=True):
        assert (job["attemptsMade"], job["attemptsStarted"]) == (1, 1), job
        ran = job["processedBy"]
        by[ran] += 1
        if ran == "node":
            assert job["id"] in node_starts, job
            expected = {"id": job["id"], "by": "node", "double": 2 * spec["data"]["n"]}
        else:
            assert ran in gpu_names(qname) and job["id"] not in node_starts, job
            expected = {"model": spec["data"]["model"]}
        assert job["returnvalue"] == expected, job
    assert by["node"] == len(node_starts) > 0, by
    assert total - by["node"] > 0, "the GPU workers took no job"
    final = dict.fromkeys(STATES, 0) | {"completed": total}
    assert stable_counts(redis_url, qname, queue) == final
    queue.close()


def test_malformed_model_jobs_from_node_fail_cleanly(
    redis_url: str, qname: str, supervise: Start
) -> None:
    """Jobs from Node whose data is not a JSON object, whose model is unknown,
    not a string or has odd characters fail at once with a reason that says
    what is wrong (no retry, even with attempts 3); the good jobs around them
    complete, the GPU workers keep their Redis connections (no crash, no
    restart) and take a job added afterwards."""
    supervise()
    before = node_workers(redis_url, qname, 2)
    bad: list[tuple[Any, str]] = [
        ("just a string", "job data must be an object naming its model in 'model'"),
        ([1, 2, 3], "job data must be an object naming its model in 'model'"),
        (None, "job data must be an object naming its model in 'model'"),
        ({"model": "t-nope", "working": "1GiB"}, "unknown model 't-nope'"),
        ({"model": "../t-small", "working": "1GiB"}, "bad model name '../t-small'"),
        ({"model": "t small\n", "working": "1GiB"}, "bad model name 't small\\n'"),
        ({"model": 42, "working": "1GiB"}, "bad model name 42"),
        ({"model": "t" * 65, "working": "1GiB"}, f"bad model name '{'t' * 65}'"),
        ({"model": "t-small", "working": "lots"}, "cannot work out the VRAM need"),
    ]
    specs = [{"name": "test.model", "data": {"model": "t-small", "s": 0.05}}]
    specs += [
        {"name": "test.model", "data": data, "opts": {"attempts": 3}} for data, _ in bad
    ]
    specs.append({"name": "test.model", "data": {"model": "t-mid", "s": 0.05}})
    added = call(redis_url, qname, "addBulk", specs)
    # data that is not JSON at all, as a client other than BullMQ may write
    now = str(int(time.time() * 1000))
    node(
        redis_url,
        "raw",
        [
            ["HSET", f"bull:{qname}:not-json", "name", "test.model"]
            + ["data", '{"model": "t-small", ', "opts", '{"attempts":3}']
            + ["timestamp", now, "delay", "0", "priority", "0"],
            ["LPUSH", f"bull:{qname}:wait", "not-json"],
            ["ZADD", f"bull:{qname}:marker", "0", "0"],
        ],
    )
    ids = [job["id"] for job in added] + ["not-json"]
    bad.append(('{"model": "t-small", ', "malformed job: job data is not valid JSON"))
    wait_until(
        lambda: (c := counts(redis_url, qname))["completed"] + c["failed"] == len(ids),
        60,
        interval=0.2,
        what="every job to finish",
    )
    late = call(redis_url, qname, "add", "test.model", {"model": "t-big", "s": 0.05})
    wait_until(
        lambda: counts(redis_url, qname)["completed"] == 3,
        30,
        interval=0.2,
        what="the GPU workers to keep going",
    )
    jobs = node(redis_url, "read", qname, [*ids, late["id"]])
    assert not any("error" in j for j in jobs), jobs
    good = [jobs[0], jobs[-3], jobs[-1]]
    assert [j["returnvalue"] for j in good] == [
        {"model": "t-small"},
        {"model": "t-mid"},
        {"model": "t-big"},
    ]
    for job, (data, reason) in zip([*jobs[1:-3], jobs[-2]], bad, strict=True):
        assert job["data"] == data
        assert reason in (job["failedReason"] or ""), (data, job["failedReason"])
        assert job["attemptsMade"] == 1 and job["finishedOn"], job
    assert counts(redis_url, qname) == dict.fromkeys(STATES, 0) | {
        "completed": 3,
        "failed": len(bad),
    }
    after = node_workers(redis_url, qname, 2)
    assert sorted((w["id"], w["rawname"]) for w in after) == sorted(
        (w["id"], w["rawname"]) for w in before
    ), "a GPU worker reconnected: it crashed or was restarted"
    assert [w["rawname"] for w in sorted(after, key=lambda w: w["rawname"])] == (
        raw_names(qname, gpu_names(qname))
    )
