"""Document pipeline, end to end: `python -m examples.doc_pipeline.run`.

Uploads documents, embeds their chunks against a local embedding API that
answers 429 above its rate limit (never seen: the queue's limiter keeps the
workers under it) and that goes down for a while (ridden out by retries with
backoff), and stores every vector exactly once.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import redis

from examples.doc_pipeline.embedding_api import EmbeddingApi
from examples.doc_pipeline.pipeline import CHUNK, EMBED, STORE, Pipeline, vectors_key
from examples.stack import wait_for
from queues import Queue

WORDS = (
    "queue worker redis embed vector chunk store limit retry backoff gpu batch "
    "flow parent child event stream"
).split()


def document(doc: int, words: int) -> str:
    """A synthetic document."""
    return " ".join(f"{WORDS[(doc * 7 + i) % len(WORDS)]}{i}" for i in range(words))


def scenario(
    redis_url: str,
    docs: int = 4,
    words: int = 240,
    limit_per_s: int = 30,
    outage_s: float = 1.5,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Run the pipeline through an outage; returns what happened."""
    api = EmbeddingApi(limit_per_s)
    pipeline = Pipeline(redis_url, api.url, limit_per_s)
    pipeline.start()
    started = time.monotonic()
    try:
        for d in range(docs):
            pipeline.submit(f"d{d}", document(d, words))
        expected = docs * len(range(0, words, pipeline.words_per_chunk))
        wait_for(lambda: api.served >= expected // 3, timeout, "a third of the embeds")
        api.down()
        time.sleep(outage_s)
        api.up()
        with Queue(STORE, redis_url) as store:
            wait_for(
                lambda: store.get_counts()["completed"] == docs,
                timeout,
                "every document stored",
            )
        client = redis.Redis.from_url(redis_url, decode_responses=True)
        stored = {f"d{d}": client.hlen(vectors_key(f"d{d}")) for d in range(docs)}
        client.close()
        counts = {}
        for name in (CHUNK, EMBED, STORE):
            with Queue(name, redis_url) as q:
                counts[name] = q.get_counts()
        return {
            "expected_chunks": expected,
            "stored": stored,
            "counts": counts,
            "served": api.served,
            "too_many": api.too_many,
            "unavailable": api.unavailable,
            "peak_per_s": api.peak_per_s,
            "limit_per_s": limit_per_s,
            "seconds": time.monotonic() - started,
        }
    finally:
        pipeline.stop()
        api.close()


def main() -> None:
    """Run on a throwaway Redis and print the outcome."""
    from queues.devredis import RedisServer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis-url", help="an existing Redis (default: start one)")
    args = parser.parse_args()
    server = None if args.redis_url else RedisServer().start()
    try:
        result = scenario(args.redis_url or server.url)  # type: ignore[union-attr]
    finally:
        if server is not None:
            server.stop()
    print(
        f"{sum(result['stored'].values())} of {result['expected_chunks']} chunks "
        f"stored in {result['seconds']:.1f}s; the API served {result['served']} "
        f"(peak {result['peak_per_s']}/s, limit {result['limit_per_s']}/s), "
        f"429s: {result['too_many']}, 503s during the outage: {result['unavailable']}"
    )


if __name__ == "__main__":
    main()
