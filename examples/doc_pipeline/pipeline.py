"""The document pipeline of `../shared/seeds/002`: chunk -> embed -> store.

- `docs-chunk`: splits a document and adds a flow: one `store` parent in
  `docs-store` whose children are one `embed` job per chunk in `docs-embed`.
- `docs-embed`: calls the embedding API. Its workers share one limiter
  (`limiter={"max", "duration"}`, enforced in Redis across every worker of
  the queue), set to half the API's per-second limit: the API counts any
  sliding second, the limiter fixed windows, and two adjacent windows can
  both be full inside one sliding second. Failures (an outage, a 5xx) are
  retried with exponential backoff; nothing is dropped.
- `docs-store`: runs once every chunk is embedded (the flow releases it),
  reads its children's return values and writes the vectors.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import redis

from queues import AsyncFlowProducer, Job, Queue, Worker

CHUNK, EMBED, STORE = "docs-chunk", "docs-embed", "docs-store"
EMBED_RETRY = {"attempts": 12, "backoff": {"type": "exponential", "delay": 100}}


def vectors_key(doc_id: str) -> str:
    """Where the example's "vector store" keeps a document (a Redis hash)."""
    return f"example:vectors:{doc_id}"


def split(text: str, words_per_chunk: int) -> list[str]:
    """Chunks of at most `words_per_chunk` words."""
    words = text.split()
    return [
        " ".join(words[i : i + words_per_chunk])
        for i in range(0, len(words), words_per_chunk)
    ]


@dataclass
class Pipeline:
    """Producers and workers of the three queues (workers run in threads)."""

    redis_url: str
    embedding_url: str
    api_limit_per_s: int
    words_per_chunk: int = 20
    workers: list[Worker] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def submit(self, doc_id: str, text: str) -> None:
        """What the upload handler does: enqueue and return."""
        with Queue(CHUNK, self.redis_url) as q:
            q.add(
                "chunk",
                {"doc_id": doc_id, "text": text},
                job_id=f"doc-{doc_id}",
                attempts=3,
                backoff=500,
            )

    async def chunk(self, job: Job) -> int:
        """Split the document and add its embed/store flow."""
        doc_id = job.data["doc_id"]
        chunks = split(job.data["text"], self.words_per_chunk)
        flows = AsyncFlowProducer(self.redis_url)
        try:
            await flows.add(
                {
                    "name": "store",
                    "queue_name": STORE,
                    "data": {"doc_id": doc_id, "chunks": len(chunks)},
                    "opts": {"job_id": f"store-{doc_id}"},
                    "children": [
                        {
                            "name": "embed",
                            "queue_name": EMBED,
                            "data": {"doc_id": doc_id, "index": i, "text": text},
                            "opts": {"job_id": f"embed-{doc_id}-{i}", **EMBED_RETRY},
                        }
                        for i, text in enumerate(chunks)
                    ],
                }
            )
        finally:
            await flows.close()
        return len(chunks)

    def embed(self, job: Job) -> list[float]:
        """Call the embedding API (a plain def: it runs in a worker thread)."""
        request = urllib.request.Request(
            self.embedding_url,
            data=json.dumps({"text": job.data["text"]}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return list(json.loads(response.read())["embedding"])
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"embedding API answered {exc.code}") from None

    async def store(self, job: Job) -> int:
        """Write every chunk's vector once all are embedded."""
        values = await job.get_children_values()
        vectors: dict[str, str] = {}
        for key, vector in values.items():
            index = key.rsplit("-", 1)[-1]
            vectors[index] = json.dumps(vector)
        client = redis.Redis.from_url(self.redis_url)
        try:
            client.hset(vectors_key(job.data["doc_id"]), mapping=vectors)
        finally:
            client.close()
        return len(vectors)

    def start(self, embed_workers: int = 2) -> None:
        """Start the workers: one for chunk and store, several for embed."""
        limiter = {"max": max(self.api_limit_per_s // 2, 1), "duration": 1000}
        specs: list[tuple[str, Any, dict[str, Any]]] = [
            (CHUNK, self.chunk, {"concurrency": 2}),
            (STORE, self.store, {"concurrency": 2}),
        ] + [
            (EMBED, self.embed, {"concurrency": 4, "limiter": limiter})
        ] * embed_workers
        for queue, processor, options in specs:
            worker = Worker(queue, processor, connection=self.redis_url, **options)
            thread = threading.Thread(target=worker.run, daemon=True)
            thread.start()
            self.workers.append(worker)
            self.threads.append(thread)

    def stop(self) -> None:
        """Close every worker (running jobs finish)."""
        for worker in self.workers:
            worker.close()
        for thread in self.threads:
            thread.join(15)
