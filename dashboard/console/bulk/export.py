"""JSON Lines export of selected jobs or of every job of a tab: one job per
line, read a chunk at a time (memory bounded by the chunk, whatever the
count), job content through the redaction hook, values over the detail value
cap (`conf.detail_value_max_bytes`) left out (named in `left_out`), and a job
that cannot be read whole exported as far as it can be, never breaking the
stream."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from dashboard.shared import conf
from dashboard.shared import redis as pages_redis
from dashboard.shared.discovery import QueueRef
from dashboard.shared.redaction import redact_fields
from queues import Job, ops
from queues.keys import QueueKeys

from ..reads import run

#: Jobs read per Redis call.
CHUNK = 200


def line(job: Job, state: str, queue_key: str) -> str:
    """One job as a JSON line (content redacted)."""
    try:
        fields: dict[str, Any] = redact_fields(job.to_dict())
        fields = {"queue": queue_key, "state": state, **fields}
        if job.left_out:
            fields["left_out"] = dict(job.left_out)
        if job.malformed:
            fields["malformed"] = job.malformed
        return json.dumps(fields, default=str) + "\n"
    except Exception as exc:  # noqa: BLE001 - one odd job never ends the file
        error = f"{type(exc).__name__}: {exc}"[:300]
        return json.dumps({"queue": queue_key, "id": job.id, "error": error}) + "\n"


def _jobs(ref: QueueRef, ids: Sequence[str]) -> Iterator[str]:
    keys = QueueKeys(ref.name, ref.prefix)
    q = pages_redis.queue(ref.prefix, ref.name)
    cap = conf.get().detail_value_max_bytes
    reads = run(ops.get_job_hashes(keys, ids, cap, with_state=True))
    for job_id, read in zip(ids, reads):
        if not read.fields and not read.left_out:
            continue  # gone since it was listed or selected
        job = Job.from_hash(q, job_id, read.fields, read.left_out)
        yield line(job, read.state.value, ref.key)


def selected(ref: QueueRef, ids: Sequence[str]) -> Iterator[str]:
    """Lines of the selected jobs, in the order given."""
    for i in range(0, len(ids), CHUNK):
        yield from _jobs(ref, ids[i : i + CHUNK])


def matching(
    ref: QueueRef, states: Sequence[str], total: int, asc: bool
) -> Iterator[str]:
    """Lines of every job of the states, in the list's order, at most `total`
    (the count when the export started: jobs arriving meanwhile do not make
    it run on)."""
    keys = QueueKeys(ref.name, ref.prefix)
    for start in range(0, total, CHUNK):
        end = min(start + CHUNK, total) - 1
        ids = run(ops.page_ids(keys, states, start, end, asc))
        if not ids:
            return
        yield from _jobs(ref, ids)
