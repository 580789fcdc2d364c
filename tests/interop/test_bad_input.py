"""Interop point 8: jobs another client wrote badly. Bullpen fails what it
cannot run with a clear reason, runs what it can, keeps going, and leaves
every job readable by Node."""

from __future__ import annotations

import time

from queues import Queue
from tests.helpers import wait_until

from .helpers import call, node, python_worker


def test_bad_jobs_from_another_client(redis_url: str, qname: str) -> None:
    """Unknown opts keys are ignored and the job runs; data or opts that are not
    JSON fail the job as "malformed job: ..." (data kept as a JSON string of
    its text, so Node's Job.fromJSON and getJobs still work); good jobs
    around them complete and Node reads every one afterwards."""
    base = f"bull:{qname}:"
    now = str(int(time.time() * 1000))
    odd = call(
        redis_url,
        qname,
        "add",
        "odd",
        {"n": 3},
        {"attempts": 1, "colour": "blue", "nested": {"x": [1, 2]}, "fpof": "?"},
    )
    node(
        redis_url,
        "raw",
        [
            [
                "HSET",
                base + "bad-data",
                "name",
                "bad",
                "data",
                "not json {",
                "opts",
                '{"attempts":0}',
                "timestamp",
                now,
                "delay",
                "0",
                "priority",
                "0",
            ],
            [
                "HSET",
                base + "bad-opts",
                "name",
                "bad",
                "data",
                "{}",
                "opts",
                "{oops",
                "timestamp",
                now,
                "delay",
                "0",
                "priority",
                "0",
            ],
            ["LPUSH", base + "wait", "bad-data", "bad-opts"],
            ["ZADD", base + "marker", "0", "0"],
        ],
    )
    good = call(redis_url, qname, "add", "good", {"n": 5})
    queue = Queue(qname, redis_url)
    with python_worker(redis_url, qname):
        wait_until(
            lambda: (
                queue.get_counts("completed", "failed") == {"completed": 2, "failed": 2}
            ),
            30,
            what="2 completed and 2 failed jobs",
        )
        late = call(redis_url, qname, "add", "late", {"n": 6})
        wait_until(
            lambda: queue.get_counts("completed") == {"completed": 3},
            30,
            what="the worker to keep going",
        )
    queue.close()

    jobs = {
        j["id"]: j
        for j in node(
            redis_url,
            "read",
            qname,
            [odd["id"], "bad-data", "bad-opts", good["id"], late["id"]],
        )
    }
    assert not any("error" in j for j in jobs.values()), jobs
    assert jobs[odd["id"]]["returnvalue"] == {"id": odd["id"], "by": "py", "double": 6}
    assert jobs[odd["id"]]["opts"]["colour"] == "blue"
    assert jobs[good["id"]]["returnvalue"]["double"] == 10
    assert jobs[late["id"]]["returnvalue"]["double"] == 12
    bad_data = jobs["bad-data"]
    assert bad_data["failedReason"].startswith(
        "malformed job: job data is not valid JSON"
    ), bad_data["failedReason"]
    assert bad_data["data"] == "not json {"
    assert jobs["bad-opts"]["failedReason"].startswith(
        "malformed job: job opts is not valid JSON"
    )
    failed = call(redis_url, qname, "getJobs", ["failed"])
    assert sorted(j["id"] for j in failed) == ["bad-data", "bad-opts"]
    assert node(redis_url, "raw", [["HGET", base + "bad-opts", "rawOpts"]]) == ["{oops"]
