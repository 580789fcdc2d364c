"""Job hashes written by another client that cannot be run (data that is
not JSON, a missing `name` or `data`) fail with a clear reason starting
"malformed job", and the worker goes on with the good jobs."""

from __future__ import annotations

import io
import logging
import threading
from typing import Any

import pytest
import redis

from queues import Job, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import now_ms, worker_thread


def _write_by_hand(
    r: redis.Redis, q: Queue, job_id: str, fields: dict[str, Any]
) -> None:
    """Store a job the way a foreign client might: HSET + LPUSH wait + marker."""
    if fields:
        r.hset(q.keys.job(job_id), mapping=fields)
    r.lpush(q.keys.wait, job_id)
    r.zadd(q.keys.marker, {"0": 0})


CASES = {
    "data-not-json": (
        {"name": "x", "data": "{not json", "opts": "{}"},
        "job data is not valid JSON",
    ),
    "data-truncated": (
        {"name": "x", "data": '{"a": [1, 2', "opts": "{}"},
        "job data is not valid JSON",
    ),
    "no-name": ({"data": '{"a": 1}', "opts": "{}"}, "the job hash has no 'name' field"),
    "no-data": ({"name": "x", "opts": "{}"}, "the job hash has no 'data' field"),
    "no-name-no-data": ({"opts": "{}"}, "no 'name' field"),
    "opts-not-json": (
        {"name": "x", "data": "{}", "opts": "{oops"},
        "job opts is not valid JSON",
    ),
    "data-not-utf8": (
        {"name": "x", "data": b'{"a": "\xff\xfe"}', "opts": "{}"},
        "job data is not valid JSON",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_job_fails_and_good_jobs_still_run(
    redis_url: str, q: Queue, r: redis.Redis, case: str
) -> None:
    """A hand-written bad job fails with "malformed job: ..." and is never given
    to the processor; the good jobs around it, and later ones, complete."""
    fields, reason_part = CASES[case]
    fields = dict(fields, timestamp=str(now_ms()))
    seen: list[str] = []
    lock = threading.Lock()

    def processor(job: Job) -> Any:
        with lock:
            seen.append(job.id)
        return job.data

    before = q.add("good", {"n": 1})
    _write_by_hand(r, q, "foreign-1", fields)
    after = [q.add("good", {"n": i}) for i in range(2, 5)]
    with worker_thread(q.name, processor, redis_url, concurrency=2) as w:
        wait_until(
            lambda: (
                q.get_counts("completed", "failed") == {"completed": 4, "failed": 1}
            ),
            10,
            what="4 completed and 1 failed",
        )
        q.add("good", {"n": 5})  # the worker is still alive and working
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 5,
            10,
            what="a job added afterwards",
        )
        assert w.alive
    # read with plain commands: Queue.get_job cannot read non-UTF-8 hashes (see below)
    assert r.zscore(q.keys.failed, "foreign-1") is not None
    reason = r.hget(q.keys.job("foreign-1"), "failedReason")
    assert reason.startswith("malformed job"), reason
    assert reason_part in reason, reason
    assert "foreign-1" not in seen
    assert q.get_job(before.id).returnvalue == {"n": 1}
    assert [q.get_job(j.id).returnvalue for j in after] == [
        {"n": i} for i in range(2, 5)
    ]
    assert q.get_counts("active", "waiting")["active"] == 0


def test_queue_reads_a_job_whose_data_is_not_utf8(q: Queue, r: redis.Redis) -> None:
    """Queue.get_job returns a job written with non-UTF-8 data, marked malformed."""
    _write_by_hand(r, q, "foreign-1", CASES["data-not-utf8"][0])
    job = q.get_job("foreign-1")
    assert job is not None and job.malformed is not None
    assert job.malformed.startswith("malformed job")


def test_several_malformed_jobs_among_many_good_ones(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """A batch claim holding bad and good jobs fails only the bad ones."""
    for i in range(20):
        q.add("good", i)
        if i % 4 == 0:
            _write_by_hand(
                r,
                q,
                f"bad-{i}",
                {"name": "x", "data": "not json", "timestamp": str(now_ms())},
            )
    with worker_thread(q.name, lambda job: job.data, redis_url, concurrency=8):
        wait_until(
            lambda: (
                q.get_counts("completed", "failed") == {"completed": 20, "failed": 5}
            ),
            10,
            what="20 completed and 5 failed",
        )
    for i in range(0, 20, 4):
        assert q.get_job(f"bad-{i}").failed_reason.startswith("malformed job")
    assert q.get_counts("active")["active"] == 0


def test_error_message_that_is_not_valid_text(redis_url: str, q: Queue) -> None:
    """A processor error whose message holds a lone surrogate (as text decoded
    from bad bytes can) still fails its job promptly, with a readable reason."""

    def processor(job: Job) -> Any:
        if job.name == "bad":
            raise RuntimeError("cannot handle \udcff here")
        return "ok"

    # What the worker logs of it reaches a strict UTF-8 handler (a log file).
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    handler = logging.StreamHandler(out)
    logging.getLogger("queues.worker").addHandler(handler)
    bad = q.add("bad", None)
    good = q.add("good", None)
    with worker_thread(q.name, processor, redis_url) as w:
        wait_until(
            lambda: (
                q.get_counts("completed", "failed") == {"completed": 1, "failed": 1}
            ),
            5,
            what="1 completed and 1 failed",
        )
        assert w.alive
    failed = q.get_job(bad.id)
    assert failed.failed_reason.startswith("cannot handle "), failed.failed_reason
    assert failed.failed_reason.endswith(" here")
    assert q.get_job(good.id).returnvalue == "ok"
    assert q.get_counts("active")["active"] == 0
    logging.getLogger("queues.worker").removeHandler(handler)
    out.flush()
    logged = out.buffer.getvalue().decode()  # type: ignore[attr-defined]
    assert f"job {bad.id} (bad) failed" in logged, logged
    assert "cannot handle \\udcff here" in logged, logged
