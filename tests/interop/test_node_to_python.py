"""Interop point 1: jobs produced by Node BullMQ, processed by a Bullpen
worker, read back by Node."""

from __future__ import annotations

from collections import Counter

from tests.helpers import wait_until

from .helpers import call, node, python_worker
from .jobs import check_order, mixed_jobs

PHASE_1 = 980
PHASE_2 = 20  # removeOnComplete: 5, so 1,000 jobs in all


def test_node_producer_python_worker(redis_url: str, qname: str) -> None:
    """1,000 Node jobs with priorities, delays, lifo, custom ids, retries with
    exponential backoff and retention: each completes once, in BullMQ's order;
    Node reads the return values, attempts and counts the Python worker wrote,
    and a removeOnComplete count trims the completed set."""
    specs = mixed_jobs(PHASE_1)
    added = call(redis_url, qname, "addBulk", specs)
    ids = [job["id"] for job in added]
    assert ids[5] == "custom-5" and ids[0] == "1"
    removed = {
        i for i, s in zip(ids, specs, strict=True) if s["opts"].get("removeOnComplete")
    }
    fail_first = {
        i for i, s in zip(ids, specs, strict=True) if s["data"].get("failFirst")
    }

    with python_worker(redis_url, qname) as record:
        wait_until(
            lambda: len(record.starts) >= PHASE_1 + len(fail_first),
            90,
            what="the Python worker to run every job",
        )
        counts = wait_until(
            lambda: (
                (c := call(redis_url, qname, "getJobCounts"))["completed"]
                == PHASE_1 - len(removed)
                and c
            ),
            30,
            what="Node to count every completion",
        )
    runs = Counter(job_id for job_id, _, _ in record.starts)
    assert set(runs) == set(ids)
    assert all(runs[i] == (2 if i in fail_first else 1) for i in ids)
    assert counts == {
        "active": 0,
        "completed": PHASE_1 - len(removed),
        "delayed": 0,
        "failed": 0,
        "prioritized": 0,
        "waiting": 0,
        "waiting-children": 0,
    }
    check_order(specs, ids, [(i, attempt) for i, attempt, _ in record.starts])

    jobs = node(redis_url, "read", qname, ids)
    for job_id, spec, job in zip(ids, specs, jobs, strict=True):
        if job_id in removed:
            assert job is None, f"job {job_id} has removeOnComplete and must be gone"
            continue
        n = spec["data"]["n"]
        assert job["returnvalue"] == {"id": job_id, "by": "py", "double": 2 * n}
        tries = 2 if job_id in fail_first else 1
        assert (job["attemptsMade"], job["attemptsStarted"]) == (tries, tries), job_id
        assert job["processedBy"] == "py"
        assert job["finishedOn"] >= job["processedOn"]
        if spec["opts"].get("delay"):
            assert job["processedOn"] >= job["timestamp"] + spec["opts"]["delay"]

    tail = [
        {"name": "trim", "data": {"n": i}, "opts": {"removeOnComplete": 5}}
        for i in range(PHASE_2)
    ]
    call(redis_url, qname, "addBulk", tail)
    with python_worker(redis_url, qname):
        wait_until(
            lambda: (
                call(redis_url, qname, "getJobCounts", "completed", "waiting")
                == {"completed": 5, "waiting": 0}
            ),
            30,
            what="the completed set to be trimmed to 5",
        )
    kept = call(redis_url, qname, "getJobs", ["completed"])
    assert sorted(j["name"] for j in kept) == ["trim"] * 5
