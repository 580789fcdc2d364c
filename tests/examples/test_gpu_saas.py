"""Example 1, GPU generation SaaS (examples/gpu_saas), end to end: daphne,
`manage.py runwebhooks`, a supervisor on simulated GPUs, a webhook receiver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.gpu_saas import run
from examples.stack import Stack


@pytest.fixture
def stack(redis_url: str, tmp_path: Path) -> Iterator[Stack]:
    # The receiver listens on 127.0.0.1: the stack's processes run with
    # BULLPEN_WEBHOOK_ALLOW_PRIVATE=1, set here explicitly (Stack sets it too).
    s = Stack(
        redis_url,
        tmp_path,
        {
            "BULLPEN_WEBHOOK_PROGRESS_INTERVAL_MS": "200",
            "BULLPEN_WEBHOOK_ALLOW_PRIVATE": "1",
        },
    )
    yield s
    s.close()
    print(s.logs())


def test_gpu_generation_saas(stack: Stack) -> None:
    """Each good request's webhooks arrive signed and in order (active, then
    progress rising, then completed with the image URL); the failing request
    is retried with exponential backoff and reported failed with its reason;
    polling, SSE (with the job's ticket) and SSE resume agree; a retried POST
    with the same Idempotency-Key made no second job."""
    result = run.scenario(stack, run.start(stack), timeout=60)
    assert result["rejected"] == 0
    assert result["replay"]["id"] == result["good"][0]["id"]
    for job in result["good"]:
        events = result["webhooks"][job["id"]]
        names = [e["event"] for e in events]
        assert names[0] == "active" and names[-1] == "completed"
        assert set(names[1:-1]) == {"progress"} and len(names) >= 3
        progress = [e["progress"] for e in events if e["event"] == "progress"]
        assert progress == sorted(progress)
        assert events[-1]["returnvalue"]["image_url"].endswith(f"/{job['id']}.png")
    bad = result["webhooks"][result["bad"]["id"]]
    actives = [e["timestamp"] for e in bad if e["event"] == "active"]
    assert [e["event"] for e in bad if e["event"] != "progress"] == [
        "active",
        "active",
        "active",
        "failed",
    ]
    assert bad[-1]["failed_reason"] == "the model refused this prompt"
    # Exponential backoff from 300 ms: the retries start >= 300 and >= 600 ms
    # after the failures (each attempt runs ~0.1 s before failing).
    assert actives[1] - actives[0] >= 300 + 100 and actives[2] - actives[1] >= 600 + 100
    assert result["polled"]["state"] == "completed"
    assert result["polled"]["returnvalue"]["steps"] == 6
    failed = result["finished"][-1]
    assert failed["state"] == "failed" and failed["attempts_made"] == 3
    sse = [m["event"] for m in result["sse"]]
    assert sse[0] == "state" and sse[-1] == "completed" and "progress" in sse
    assert len(result["sse"]) >= 3
    assert [m["id"] for m in result["resumed"]] == [m["id"] for m in result["sse"][3:]]
