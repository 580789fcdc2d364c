"""Interop point 5: a worker killed with SIGKILL mid-job in one language, its
job recovered by the stalled check of a worker in the other and finished.

Every worker shares one stalled-check mutex whose expiry is the interval of
the worker that took it, so all workers here use the same short interval."""

from __future__ import annotations

from queues import Queue

from .helpers import call, node, node_worker, py_worker

HANG = {"hangMs": 120_000, "n": 21}


def test_python_worker_killed_node_worker_recovers(redis_url: str, qname: str) -> None:
    """The job of a SIGKILLed Bullpen worker (lock 1 s, never renewed again) is
    moved back by Node's stalled checker and completed by Node once:
    stalledCounter 1, two starts, one attempt made."""
    queue = Queue(qname, redis_url)
    job = queue.add("hang", HANG)
    victim = py_worker(
        redis_url, qname, worker_name="victim", lock_duration=1000, stalled_interval=300
    )
    victim.wait_for("start", job.id)
    victim.kill()
    assert queue.get_job_state(job.id) == "active"
    rescuer = node_worker(redis_url, qname, name="rescuer", stalledInterval=300)
    try:
        rescuer.wait_for("done", job.id, timeout=20)
    finally:
        rescuer.stop()
    [seen] = node(redis_url, "read", qname, [job.id])
    assert seen["returnvalue"] == {"id": job.id, "by": "rescuer", "double": 42}
    assert (seen["stalledCounter"], seen["attemptsStarted"], seen["attemptsMade"]) == (
        1,
        2,
        1,
    )
    assert seen["processedBy"] == "rescuer"
    queue.close()


def test_node_worker_killed_python_worker_recovers(redis_url: str, qname: str) -> None:
    """The job of a SIGKILLed Node worker is moved back by Bullpen's stalled
    check and completed by a Bullpen worker once."""
    queue = Queue(qname, redis_url)
    job = call(redis_url, qname, "add", "hang", HANG)
    victim = node_worker(
        redis_url, qname, name="victim", lockDuration=1000, stalledInterval=300
    )
    victim.wait_for("start", job["id"])
    victim.kill()
    assert queue.get_job_state(job["id"]) == "active"
    rescuer = py_worker(redis_url, qname, worker_name="rescuer", stalled_interval=300)
    try:
        rescuer.wait_for("done", job["id"], timeout=20)
    finally:
        rescuer.stop()
    seen = queue.get_job(job["id"])
    assert seen.returnvalue == {"id": job["id"], "by": "rescuer", "double": 42}
    assert (seen.stalled_counter, seen.attempts_started, seen.attempts_made) == (
        1,
        2,
        1,
    )
    assert queue.get_job_state(job["id"]) == "completed"
    queue.close()
