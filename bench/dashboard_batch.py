"""bench/dashboard.py's batch part: a select-all Retry of --batch-jobs (100k)
failed jobs of `bull:bulk`, run by the dashboard's batch runner thread in
this process (as in daphne: same process, same GIL, same Redis), while the
overview, the queue page and a job page are requested in turn; their p95
during the batch is printed next to their p95 without it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def measure_batch(
    client: Any,
    r: Any,
    fill: Callable[..., None],
    time_requests: Callable[..., dict[str, Any]],
    pct: Callable[[list[float], float], float],
    n_jobs: int,
    n_requests: int,
) -> dict[str, Any]:
    """Idle p95 of three pages, then their p95 while the batch runs, the
    batch's duration and rate, and its audit row."""
    from django.urls import reverse

    from dashboard.console.bulk import records
    from dashboard.console.models import AuditEntry

    fill(r, "bulk", 1, n_jobs, "failed")
    time.sleep(1.0)  # the fill stamps finish times up to 0.9 s ahead
    queue = reverse("bullpen:queue", args=["bull", "bulk"])
    pages = {
        "overview": reverse("bullpen:overview"),
        "queue page": f"{queue}?state=failed",
        "job page": reverse("bullpen:job", args=["bull", "bulk", str(n_jobs // 2)]),
    }
    idle = {name: time_requests(client, url, n_requests) for name, url in pages.items()}
    bulk = reverse("bullpen:queue-bulk", args=["bull", "bulk"])
    data = {"verb": "retry", "scope": "all", "state": "failed"}
    t0 = time.perf_counter()
    response = client.post(bulk, data, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content
    during: dict[str, list[float]] = {name: [] for name in pages}
    batch = records.latest("bull", "bulk")
    while batch is not None and batch.running:
        for name, url in pages.items():
            s = time.perf_counter()
            assert client.get(url).status_code == 200
            during[name].append((time.perf_counter() - s) * 1000)
        batch = records.latest("bull", "bulk")
    seconds = time.perf_counter() - t0
    assert batch is not None and batch.status == "done", batch
    entry = AuditEntry.objects.get(pk=batch.audit_id)
    return {
        "jobs": n_jobs,
        "batch_s": seconds,
        "jobs_per_s": batch.done / seconds,
        "done": batch.done,
        "audit": entry.detail,
        "pages": {
            name: {
                "p95_idle_ms": idle[name]["p95_ms"],
                "p95_during_ms": pct(times, 0.95) if times else None,
                "requests_during": len(times),
            }
            for name, times in during.items()
        },
    }


def print_batch(result: dict[str, Any]) -> None:
    """The batch's figures, one line per page."""
    print()
    print(
        f"Select-all retry of {result['jobs']:,} failed jobs: "
        f"{result['batch_s']:.1f} s ({result['jobs_per_s']:,.0f} jobs/s), "
        f"{result['done']:,} done; audit: {result['audit']}"
    )
    print(f"{'':12} {'p95 idle':>9} {'p95 during batch':>17} {'requests':>9}")
    for name, p in result["pages"].items():
        during = p["p95_during_ms"]
        shown = f"{during:17.1f}" if during is not None else f"{'-':>17}"
        print(f"{name:12} {p['p95_idle_ms']:9.1f} {shown} {p['requests_during']:9d}")
