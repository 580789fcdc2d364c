"""Example 2, document pipeline (examples/doc_pipeline): chunk -> embed ->
store as a flow, against an embedding API that rate-limits and goes down."""

from __future__ import annotations

from examples.doc_pipeline import run
from examples.doc_pipeline.embedding_api import EmbeddingApi
from examples.doc_pipeline.pipeline import CHUNK, EMBED, STORE


def test_the_fake_api_does_answer_429_above_its_limit() -> None:
    """(So "no 429 seen" below means something.) A burst over the limit gets 429s."""
    import json
    import urllib.error
    import urllib.request

    api = EmbeddingApi(limit_per_s=5)
    codes = []
    try:
        for _ in range(8):
            request = urllib.request.Request(
                api.url, data=json.dumps({"text": "x"}).encode(), method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    codes.append(response.status)
            except urllib.error.HTTPError as exc:
                codes.append(exc.code)
    finally:
        api.close()
    assert codes == [200] * 5 + [429] * 3


def test_pipeline_stays_under_the_rate_limit_and_rides_out_an_outage(
    redis_url: str,
) -> None:
    """Every chunk of every document is embedded and stored exactly once; the
    embedding API never answered 429 (the shared limiter held the workers
    under its limit in every sliding second) though the outage made requests
    fail with 503, which retries with backoff rode out; no job failed."""
    result = run.scenario(redis_url, docs=4, words=240, limit_per_s=30, outage_s=1.5)
    per_doc = result["expected_chunks"] // 4
    assert result["stored"] == {f"d{d}": per_doc for d in range(4)}
    assert result["too_many"] == 0
    assert result["peak_per_s"] <= result["limit_per_s"]
    assert result["unavailable"] > 0
    assert result["served"] == result["expected_chunks"]
    assert result["counts"][CHUNK]["completed"] == 4
    assert result["counts"][EMBED]["completed"] == result["expected_chunks"]
    assert result["counts"][STORE]["completed"] == 4
    assert all(c["failed"] == 0 for c in result["counts"].values())
