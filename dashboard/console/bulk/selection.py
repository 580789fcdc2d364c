"""The selected jobs of a page, acted on in one request: ids validated,
each job's state read in one pipeline, the verb (shared/verbs.py) applied to
those whose state allows it (its operation on many ids: one pipeline of the
queue core's operations), the others named."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dashboard.shared import redis as pages_redis
from dashboard.shared import verbs
from dashboard.shared.discovery import QueueRef
from dashboard.shared.verbs import Params, Verb
from queues import JobState, ops
from queues.drive import gather
from queues.keys import QueueKeys, names_queue_key

from ..reads import gpu_fleet, run

#: Most ids one request may name (a page holds BULLPEN_PAGE_SIZE; Django
#: refuses a form of over 1,000 fields first).
MAX_IDS = 500
#: Longest id accepted (BullMQ sets none; the GPU cancel key takes 200).
MAX_ID_CHARS = 1_000


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


def where(ref: QueueRef) -> verbs.Where:
    """Where a verb acts from the pages: the queue and the GPU fleet on the
    pages' client."""
    return verbs.Where(pages_redis.queue(ref.prefix, ref.name), gpu_fleet())


def act(ref: QueueRef, verb: Verb, ids: list[str], params: Params) -> Outcome:
    """Apply `verb` (with its parameter) to the jobs whose state allows it:
    one pipeline of state reads, then the verb's own operation on many ids."""
    keys = QueueKeys(ref.name, ref.prefix)
    states: list[JobState] = run(gather([ops.get_state(keys, i) for i in ids]))
    out = Outcome()
    ready: list[tuple[str, str]] = []
    for job_id, state in zip(ids, states):
        if state is JobState.UNKNOWN:
            out.refused[job_id] = "no longer exists"
        elif not verb.applies_to(state.value):
            out.refused[job_id] = f"it is {state.value}"
        else:
            ready.append((job_id, state.value))
    if not ready:
        return out
    results = verb.on_ids(where(ref), ready, params)
    for (job_id, _), result in zip(ready, results):
        if isinstance(result, Exception):
            out.refused[job_id] = str(result)
        elif result is False:
            out.refused[job_id] = "no longer exists"
        else:
            out.done.append(job_id)
    return out
