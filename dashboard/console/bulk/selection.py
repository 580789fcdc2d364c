"""The selected jobs of a page, acted on in one request: ids validated,
each job's state read in one pipeline, the verb applied to those whose state
allows it (one pipeline of the queue core's operations), the others named."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dashboard.shared.discovery import QueueRef
from gpu_workers.exceptions import GpuWorkerError
from queues import JobState, codec, ops
from queues.drive import cmd, gather, guarded
from queues.exceptions import QueueError
from queues.keys import QueueKeys, names_queue_key

from ..reads import gpu_fleet, run

#: Most ids one request may name (a page holds BULLPEN_PAGE_SIZE; Django
#: refuses a form of over 1,000 fields first).
MAX_IDS = 500
#: Longest id accepted (BullMQ sets none; the GPU cancel key takes 200).
MAX_ID_CHARS = 1_000
#: Verbs on selected jobs and the states each may act on.
VERBS: dict[str, frozenset[str]] = {
    "retry": frozenset({"failed", "completed"}),
    "promote": frozenset({"delayed"}),
    "remove": frozenset(
        {"waiting", "prioritized", "delayed", "waiting-children", "completed", "failed"}
    ),
    "cancel": frozenset({"active"}),
}


class SelectionError(ValueError):
    """Raised when the selected ids are not acceptable (nothing was done)."""


def clean_ids(raw: Sequence[str]) -> list[str]:
    """The ids, in order, without repeats; SelectionError for none, too many,
    or an id that cannot be a job (empty, too long, naming a queue key)."""
    ids = list(dict.fromkeys(raw))
    if not ids:
        raise SelectionError("no job selected")
    if len(ids) > MAX_IDS:
        raise SelectionError(
            f"{len(ids)} jobs selected: at most {MAX_IDS} at once "
            "(select all matching runs a batch instead)"
        )
    for job_id in ids:
        if not job_id or len(job_id) > MAX_ID_CHARS or names_queue_key(job_id):
            raise SelectionError(f"not a job id: {job_id[:80]!r}")
    return ids


@dataclass
class Outcome:
    """What acting on a selection did."""

    done: list[str] = field(default_factory=list)
    #: id -> why it was left alone (its state, gone, locked...).
    refused: dict[str, str] = field(default_factory=dict)

    def message(self, verb: str) -> str:
        """One line for the flash and the audit row."""
        asked = len(self.done) + len(self.refused)
        text = f"{verb}: {len(self.done)} of {asked} job(s)"
        if self.refused:
            first = list(self.refused.items())[:5]
            shown = "; ".join(f"{i}: {why}" for i, why in first)
            more = len(self.refused) - 5
            text += f"; left alone: {shown}" + (f" (+{more} more)" if more > 0 else "")
        return text


def act(ref: QueueRef, verb: str, ids: list[str]) -> Outcome:
    """Apply `verb` to the jobs whose state allows it (one pipeline of state
    reads, one of actions)."""
    keys = QueueKeys(ref.name, ref.prefix)
    states: list[JobState] = run(gather([ops.get_state(keys, i) for i in ids]))
    out = Outcome()
    ready: list[tuple[str, str]] = []
    for job_id, state in zip(ids, states):
        if state is JobState.UNKNOWN:
            out.refused[job_id] = "no longer exists"
        elif state.value not in VERBS[verb]:
            out.refused[job_id] = f"it is {state.value}"
        else:
            ready.append((job_id, state.value))
    if not ready:
        return out
    if verb == "cancel":
        fleet = gpu_fleet()
        for job_id, _ in ready:
            try:
                fleet.request_cancel(ref.name, job_id, ref.prefix)
                out.done.append(job_id)
            except (GpuWorkerError, QueueError) as exc:
                out.refused[job_id] = str(exc)
        return out
    results = run(gather([guarded(_op(keys, verb, i, s)) for i, s in ready]))
    for (job_id, _), result in zip(ready, results):
        if isinstance(result, QueueError):
            out.refused[job_id] = str(result)
        elif result is False:
            out.refused[job_id] = "no longer exists"
        else:
            out.done.append(job_id)
    return out


def _op(keys: QueueKeys, verb: str, job_id: str, state: str) -> ops.Op:
    if verb == "retry":
        return _retry(keys, job_id, state)
    if verb == "promote":
        return ops.promote(keys, job_id)
    return ops.remove(keys, job_id)


def _retry(keys: QueueKeys, job_id: str, state: str) -> ops.Op[int]:
    """Job.retry without reading the whole job: its `lifo` option only."""
    raw = yield from cmd("HGET", keys.job(job_id), "opts")
    try:
        opts = codec.loads(raw) if raw else {}
    except codec.JSONDecodeError:
        opts = {}
    lifo = bool(opts.get("lifo")) if isinstance(opts, dict) else False
    return (yield from ops.reprocess(keys, job_id, state, lifo, False, False))
