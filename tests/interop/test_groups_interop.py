"""Groups on the wire (docs/groups.md): Node BullMQ producers add grouped
jobs with BullMQ Pro's option shape `{group: {id}}` and Bullpen workers run
them in group turns, each once; a Node Worker sharing a queue with a Bullpen
worker never takes a job Bullpen placed in a group (so never out of turn),
and none is lost; what bull-board reads (getJobCounts, getJobs(state)) shows
grouped jobs once active or finished, never a grouped waiting job in `wait`."""

from __future__ import annotations

from collections import Counter
from typing import Any

from queues import Queue
from tests.helpers import wait_until

from .helpers import (
    BULL,
    Process,
    call,
    node_worker,
    py_worker,
    python_worker,
    redis_arg,
)

#: Jobs per group and ungrouped ones in the producer test.
PER_GROUP = 8
UNGROUPED = 4


def node_jobs(label: str, count: int, **data: Any) -> list[dict[str, Any]]:
    """Node addBulk items; `label` "-" adds them without a group."""
    opts = {} if label == "-" else {"group": {"id": label}}
    return [
        {"name": "g", "data": {"g": label, "n": i, **data}, "opts": opts}
        for i in range(count)
    ]


def longest_run_while_both_wait(labels: list[str], a: str, b: str) -> int:
    """The longest run of starts from one of two groups while the other
    still had jobs waiting (weight 1 each: fair turns make it 1)."""
    left = Counter(labels)
    longest = run = 0
    previous = None
    for label in labels:
        if label not in (a, b):
            continue
        other = b if label == a else a
        if left[other] > 0:
            run = run + 1 if label == previous else 1
            longest = max(longest, run)
        previous = label
        left[label] -= 1
    return longest


def run_node_burst(redis_url: str, qname: str) -> tuple[dict[str, str], list[str]]:
    """Node adds every acme job, then every beta job, then ungrouped ones (a
    FIFO runs all of acme first); one Bullpen worker runs them all, each
    once. Returns each job's label and the labels in start order."""
    specs = node_jobs("acme", PER_GROUP) + node_jobs("beta", PER_GROUP)
    specs += node_jobs("-", UNGROUPED)
    added = call(redis_url, qname, "addBulk", specs)
    label_of = {job["id"]: job["data"]["g"] for job in added}
    assert added[0]["opts"]["group"] == {"id": "acme"}
    queue = Queue(qname, redis_url)
    try:
        with python_worker(redis_url, qname) as record:
            wait_until(
                lambda: queue.get_counts("completed")["completed"] == len(specs),
                60,
                what="every job to complete",
            )
        runs = Counter(job_id for job_id, _, _ in record.starts)
        assert set(runs) == set(label_of) and set(runs.values()) == {1}
        read = call(redis_url, qname, "getJobs", ["completed"], 0, -1)
        assert {job["id"] for job in read} == set(label_of)
        # Idle groups without settings are forgotten once their jobs ran.
        assert queue.get_groups() == []
        assert queue.get_group_summary().waiting == 0
        for job_id, label in label_of.items():
            gid = queue.client.hget(queue.keys.job(job_id), "gid")
            assert gid == (None if label == "-" else label), job_id
    finally:
        queue.close()
    return label_of, [label_of[job_id] for job_id, _, _ in record.starts]


def test_node_producer_grouped_jobs_run_once_in_their_groups(
    redis_url: str, qname: str
) -> None:
    """Node's `{group: {id}}` jobs are adopted into their groups (field gid)
    and each runs exactly once, by Bullpen; Node reads them completed."""
    run_node_burst(redis_url, qname)


def test_node_producer_grouped_jobs_run_in_turns(redis_url: str, qname: str) -> None:
    """Starts alternate between acme and beta while both have work."""
    _, labels = run_node_burst(redis_url, qname)
    assert longest_run_while_both_wait(labels, "acme", "beta") == 1, labels


def test_node_worker_never_takes_a_bullpen_grouped_job(
    redis_url: str, qname: str
) -> None:
    """A Node Worker (short stalled checks) and a Bullpen worker on one queue;
    Python adds grouped jobs, some running past Node's stalled interval, and
    ungrouped ones: Node runs no grouped job and never moves one back; every
    grouped job completes once, by Bullpen; the ungrouped ones are shared."""
    queue = Queue(qname, redis_url)
    node = node_worker(
        redis_url, qname, name="node", concurrency=1, stalledInterval=200
    )
    py = py_worker(redis_url, qname, worker_name="py", concurrency=4)
    try:
        grouped = [
            {
                "name": "g",
                "data": {"g": g, "n": i, "sleepMs": 600 if i < 2 else 20},
                "opts": {"group": g},
            }
            for g in ("acme", "beta")
            for i in range(6)
        ]
        plain = [
            {"name": "u", "data": {"g": "-", "n": i, "sleepMs": 150}} for i in range(16)
        ]
        jobs = queue.add_bulk(grouped + plain)
        grouped_ids = {job.id for job in jobs[: len(grouped)]}
        wait_until(
            lambda: queue.get_counts("completed")["completed"] == len(jobs),
            60,
            what="every job to complete",
        )
    finally:
        node.stop()
        py.stop()
        queue.close()
    node_starts = Counter(line["start"] for line in node.seen("start"))
    py_starts = Counter(line["start"] for line in py.seen("start"))
    assert not grouped_ids & set(node_starts), "Node ran a grouped job"
    assert all(py_starts[job_id] == 1 for job_id in grouped_ids)
    every = node_starts + py_starts
    assert set(every) == {job.id for job in jobs} and set(every.values()) == {1}
    assert node_starts and set(py_starts) - grouped_ids, "ungrouped are shared"
    assert not node.seen("failed") and not node.seen("error")


def test_bull_board_reads_of_grouped_jobs(redis_url: str, qname: str) -> None:
    """What bull-board reads from Node: a grouped waiting job is not in
    `wait` (nor counted waiting); once a Bullpen worker runs it, it is
    active, then completed, in getJobCounts and getJobs."""
    queue = Queue(qname, redis_url)
    try:
        job = queue.add("g", {"sleepMs": 1500}, group="acme")
        plain = queue.add("u", {})
        waiting = call(redis_url, qname, "getJobs", ["wait"], 0, -1)
        assert [j["id"] for j in waiting] == [plain.id]
        counts = call(redis_url, qname, "getJobCounts")
        assert counts["waiting"] == 1 and counts["active"] == 0
        watch = Process(
            ["node", str(BULL), redis_arg(redis_url), "watch", qname, "20"],
            "node watch",
        )
        watch.wait_for("ready")
        with python_worker(redis_url, qname, concurrency=2):
            # getJobs(['active']) then getJobCounts() in one watch round: the
            # job runs 1.5 s, so the round that first lists it counts it.
            seen = wait_until(
                lambda: [
                    line
                    for line in watch.seen("counts")
                    if job.id in {j["id"] for j in line["active"] if j}
                ],
                30,
                what="Node to list the grouped job active",
            )
            assert seen[0]["counts"]["active"] >= 1
            assert seen[0]["counts"]["waiting"] == 0
            wait_until(
                lambda: queue.get_counts("completed")["completed"] == 2,
                30,
                what="both jobs to complete",
            )
        watch.stop()
        done = call(redis_url, qname, "getJobs", ["completed"], 0, -1)
        assert {j["id"] for j in done} == {job.id, plain.id}
        counts = call(redis_url, qname, "getJobCounts")
        assert counts["completed"] == 2 and counts["waiting"] == 0
        assert counts["active"] == 0
    finally:
        queue.close()
