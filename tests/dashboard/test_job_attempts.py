"""The job page's Attempts table: Bullpen's records of a job real workers
ran (a GPU worker's with its GPU), or the attempts known from BullMQ."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from queues import Job, Queue
from tests.dashboard.helpers import job_url, run_jobs
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers handlers
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread

pytestmark = pytest.mark.django_db


def _rows(html: str) -> list[str]:
    table = html.split('<section class="panel" id="attempts">')[1].split("</section>")[
        0
    ]
    return table.split('<tr data-attempt="')[1:]


def test_recorded_attempts_table(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A retried then completed job: a row per attempt with its outcome and
    the first line of its error (a traceback's exception line)."""
    q = Queue(qname, dashboard_redis)
    job = q.add("job", {}, attempts=2)

    def flaky(j: Job[Any]) -> str:
        if j.attempts_made == 0:
            raise ValueError("bad input\nmore detail")
        return "ok"

    with worker_thread(qname, flaky, dashboard_redis, worker_name="page-w"):
        wait_until(lambda: q.get_job_state(job.id).value == "completed", 10)
    html = admin_client.get(job_url(q, job.id)).content.decode()
    assert "2 recorded" in html and "known from BullMQ" not in html
    first, second = _rows(html)
    assert first.startswith("1") and ">retried<" in first and "bad input" in first
    assert "more detail" not in first.split("title=")[0]
    assert second.startswith("2") and ">completed<" in second and "page-w" in second


def test_gpu_attempt_shows_its_gpu(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A job a GPU worker ran: its row names the (simulated) GPU."""
    q = Queue(qname, dashboard_redis)
    job = q.add("test.sleep", {"s": 0.05, "vram": "1GiB"})
    worker = WorkerThread(make_spec(dashboard_redis, qname))
    try:
        wait_until(lambda: q.get_job_state(job.id).value == "completed", 10)
    finally:
        worker.stop()
    (row,) = _rows(admin_client.get(job_url(q, job.id)).content.decode())
    assert "SIM-t-0" in row and "simulated" in row and ">completed<" in row


def test_attempts_known_from_bullmq(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """No record (another client ran it): the table says so and shows the
    started attempt with BullMQ's failed reason."""
    q = Queue(qname, dashboard_redis)
    trace = json.dumps(["Error: node failure\n    at job.js:3"])
    [job_id] = run_jobs(
        q, 1, "failed", value="node failure", fields=["stacktrace", trace]
    )
    html = admin_client.get(job_url(q, job_id)).content.decode()
    assert "known from BullMQ" in html
    (row,) = _rows(html)
    assert ">failed<" in row and "node failure" in row


def test_a_job_not_started_has_no_attempt_source(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A waiting job never ran: the panel says so, and does not say another
    client ran it."""
    q = Queue(qname, dashboard_redis)
    job = q.add("test.sleep", {"s": 0})
    html = admin_client.get(job_url(q, job.id)).content.decode()
    assert "Not started yet." in html
    assert "known from BullMQ" not in html
