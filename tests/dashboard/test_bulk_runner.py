"""Batches over every job of a tab against the real Redis: started by the
view (one audit row), run in chunks, bounded by their snapshot (jobs failing
meanwhile, or failing again after their retry, are left alone), resumed by
another runner once a dead one's lease expires, cancellable; the progress
fragment shows them."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from dashboard.console.bulk import records, runner
from dashboard.console.models import AuditEntry
from queues import Queue, ops
from tests.dashboard.helpers import hx_post, run_jobs
from tests.queues.transitions.helpers import (
    claimed,
    entry,
    move_to_active,
    move_to_finished,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_runner_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs its batch itself, step by step."""
    monkeypatch.setattr(runner, "ensure_started", lambda: None)


def start(client: Client, q: Queue, verb: str, state: str, **extra: Any) -> str:
    """Start a batch through the page's form; its id."""
    url = reverse("bullpen:queue-bulk", args=[q.prefix, q.name])
    data = {"verb": verb, "scope": "all", "state": state, "confirm": "1", **extra}
    response = hx_post(client, url, data)
    assert response.status_code == 200, response.content
    batch = records.latest(q.prefix, q.name)
    assert batch is not None and batch.running
    return batch.id


def test_retry_all_failed_in_chunks_with_one_audit_row(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """20 failed jobs in chunks of 7: three steps, all 20 waiting, the batch
    done, and its one audit row updated with the final counts."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 20, "failed")
    batch_id = start(admin_client, q, "retry", "failed")
    entry = AuditEntry.objects.get()
    assert entry.action == "batch.retry" and "running" in entry.detail
    steps = []
    owner = "test-owner"
    assert records.claim(batch_id, owner)
    original = runner.step

    def counted(batch: records.Batch, chunk: int) -> Any:
        steps.append(chunk)
        return original(batch, chunk)

    runner.step = counted  # type: ignore[assignment]
    try:
        batch = runner.run_batch(batch_id, owner, chunk=7, pause_s=0)
    finally:
        runner.step = original  # type: ignore[assignment]
    assert batch is not None and batch.status == "done"
    assert (batch.done, batch.skipped, batch.errors) == (20, 0, 0)
    assert len(steps) == 3
    assert q.get_counts("failed", "waiting") == {"failed": 0, "waiting": 20}
    entry = AuditEntry.objects.get()
    assert entry.outcome == "ok" and "done, 20 done, 0 skipped" in entry.detail
    assert batch_id not in records.running_ids()
    assert not records.is_leased(batch_id)


def fail_waiting(q: Queue, n: int) -> list[str]:
    """Claim n waiting jobs and fail them now, as a worker would."""
    now = ops.now_ms()
    got = claimed(move_to_active(q, now=now, count=n))
    move_to_finished(q, [entry(i, "failed", token=t) for i, t, _ in got], now=now)
    return [i for i, _, _ in got]


def test_snapshot_bound_leaves_later_failures_alone(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Retried jobs that fail again, and a job failing after the batch
    started, finish later than the bound: the batch retries the 10 it found
    and ends, without looping on them."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 10, "failed")
    batch_id = start(admin_client, q, "retry", "failed")
    assert records.claim(batch_id, "o")
    first = records.load(batch_id)
    assert first is not None
    first.done += runner.step(first, 4).done
    records.save(first, "done")
    time.sleep(0.01)
    again = fail_waiting(q, 4)  # the 4 just retried fail again
    [late] = run_jobs(q, 1, "failed", name="late")
    batch = runner.run_batch(batch_id, "o", chunk=4, pause_s=0)
    assert batch is not None and batch.status == "done" and batch.done == 10
    assert q.get_counts("failed", "waiting") == {"failed": 5, "waiting": 6}
    assert {q.get_job_state(i).value for i in [*again, late]} == {"failed"}


def test_remove_skips_locked_jobs_and_moves_its_cursor(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Remove of every completed job: all go, in chunks (the cursor moves
    past any left in place); the audit row counts them."""
    q = Queue(qname, dashboard_redis)
    ids = run_jobs(q, 9, "completed")
    q.client.zadd(f"bull:{qname}:completed", {"orphan": 1})  # no hash: skipped
    batch_id = start(admin_client, q, "remove", "completed")
    assert records.claim(batch_id, "o")
    batch = runner.run_batch(batch_id, "o", chunk=4, pause_s=0)
    assert batch is not None and batch.status == "done"
    assert (batch.done, batch.skipped) == (9, 1)
    assert all(q.get_job(i) is None for i in ids)
    assert "9 done, 1 skipped" in AuditEntry.objects.get().detail


def test_a_batch_is_resumed_after_its_lease_expires(
    dashboard_redis: str,
    admin_client: Client,
    qname: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A runner that dies mid-batch (its lease not renewed) leaves it
    running; once the lease expires another process takes it and finishes
    from where it stopped."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 12, "failed")
    batch_id = start(admin_client, q, "retry", "failed")
    monkeypatch.setattr(records, "LEASE_S", 1)
    assert records.claim(batch_id, "dead")
    first = records.load(batch_id)
    assert first is not None
    out = runner.step(first, 5)  # one chunk, then the process "dies"
    first.done += out.done
    records.save(first, "done")
    assert not records.claim(batch_id, "alive")  # still leased
    time.sleep(1.1)
    assert batch_id in records.running_ids()
    assert records.claim(batch_id, "alive")
    batch = runner.run_batch(batch_id, "alive", chunk=5, pause_s=0)
    assert batch is not None and batch.status == "done" and batch.done == 12
    assert q.get_counts("waiting")["waiting"] == 12


def test_cancel_stops_the_batch_and_updates_its_row(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Cancel from the page: the runner stops before its next chunk, the
    batch says who cancelled, the audit row (still one) too; the fragment
    shows the final counts and no longer polls."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 10, "failed")
    batch_id = start(admin_client, q, "retry", "failed")
    fragment = reverse("bullpen:queue-batch", args=[q.prefix, q.name])
    html = admin_client.get(fragment).content.decode()
    assert "every 1s" in html and "Cancel batch" in html
    assert records.claim(batch_id, "o")
    first = records.load(batch_id)
    assert first is not None
    first.done += runner.step(first, 3).done
    records.save(first, "done")
    url = reverse("bullpen:batch-cancel", args=[q.prefix, q.name, batch_id])
    assert hx_post(admin_client, url).status_code == 200
    batch = runner.run_batch(batch_id, "o", chunk=3, pause_s=0)
    assert batch is not None and batch.status == "cancelled"
    assert batch.cancel_by == "admin" and batch.done == 3
    assert q.get_counts("failed")["failed"] == 7
    entry = AuditEntry.objects.get()
    assert "cancelled by admin, 3 done" in entry.detail
    html = admin_client.get(fragment).content.decode()
    assert "every 1s" not in html and "cancelled" in html and "3 done" in html


def test_cancel_of_a_batch_nobody_runs_ends_it_at_once(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """No runner holds it: the cancel ends it in the request."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 3, "failed")
    batch_id = start(admin_client, q, "retry", "failed")
    url = reverse("bullpen:batch-cancel", args=[q.prefix, q.name, batch_id])
    assert hx_post(admin_client, url).status_code == 200
    batch = records.load(batch_id)
    assert batch is not None and batch.status == "cancelled"
    assert "cancelled by admin" in AuditEntry.objects.get().detail


def test_batch_refusals(dashboard_redis: str, admin_client: Client, qname: str) -> None:
    """A verb the tab's state does not allow, an empty state, and a second
    batch while one runs are refused; nothing is started."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 2, "failed")
    url = reverse("bullpen:queue-bulk", args=[q.prefix, q.name])
    data = {"verb": "promote", "scope": "all", "state": "failed"}
    assert hx_post(admin_client, url, data).status_code == 400
    data = {"verb": "retry", "scope": "all", "state": "completed"}
    assert hx_post(admin_client, url, data).status_code == 409
    start(admin_client, q, "retry", "failed")
    data = {"verb": "retry", "scope": "all", "state": "failed"}
    again = hx_post(admin_client, url, data)
    assert again.status_code == 409 and b"already" in again.content
    assert len(records.running_ids()) == 1


def test_two_batches_cannot_start_at_once(dashboard_redis: str, qname: str) -> None:
    """Eight requests reserving the queue's batch at the same moment: one
    wins; the reservation holds until its batch is stored and running, and a
    reservation that started nothing is given back."""
    gate = threading.Barrier(8)
    now = ops.now_ms()
    won: list[str] = []

    def try_reserve(i: int) -> None:
        gate.wait()
        if records.reserve("bull", qname, f"b{i}", now) is None:
            won.append(f"b{i}")

    threads = [threading.Thread(target=try_reserve, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert records.reserve("bull", qname, "late", now + 1000) == won[0]
    records.release("bull", qname, "late")  # not its own: changes nothing
    assert records.reserve("bull", qname, "late", now + 1000) == won[0]
    records.release("bull", qname, won[0])
    assert records.reserve("bull", qname, "late", now + 1000) is None
    # Stored and ended: the next batch may start.
    ended = records.Batch(
        id="late",
        prefix="bull",
        queue=qname,
        verb="retry",
        state="failed",
        bound="0",
        total=1,
        started_ms=now,
    )
    records.create(ended)
    records.end(ended, records.DONE, now)
    assert records.reserve("bull", qname, "next", now + 2000) is None
