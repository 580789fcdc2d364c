"""The job page and the job list rows read each job's state in the same atomic
step as its fields: while a real worker finishes jobs, no poll shows a
"completed" job without its result and finish time."""

from __future__ import annotations

from typing import Any

from django.test import RequestFactory

from dashboard.console.reads import job as job_reads
from dashboard.console.views.queue import list_context
from dashboard.shared.discovery import QueueRef
from queues import Queue
from tests.queues.test_cli import start_worker, stop_worker

JOBS = 120


def test_job_page_and_rows_never_show_completed_without_the_result(
    dashboard_redis: str, qname: str
) -> None:
    """Poll each job's detail and the "latest" list until the job is completed;
    every completed job and row carries its return value and finish time."""
    ref = QueueRef("bull", qname)
    request = RequestFactory().get("/", {"state": "latest"})
    torn: list[Any] = []
    with Queue(qname, dashboard_redis) as q:
        ids = [q.add("j", {"seconds": 0.004}).id for _ in range(JOBS)]
        worker = start_worker(dashboard_redis, qname, "slow")
        try:
            for i, job_id in enumerate(ids):
                while True:
                    detail = job_reads.job_detail(ref, job_id)
                    assert detail is not None
                    if detail.state == "completed":
                        if detail.job.returnvalue != "slept":
                            torn.append(("page", job_id))
                        break
                    if i % 4 == 0:  # the list is dearer: poll it for some jobs
                        rows = list_context(request, ref)["rows"]
                        torn += [
                            ("row", row.id)
                            for row in rows
                            if row.state == "completed" and row.finished_ms is None
                        ]
        finally:
            stop_worker(worker)
    assert torn == []
