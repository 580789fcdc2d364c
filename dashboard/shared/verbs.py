"""Every job verb, declared once, the way Django admin declares an action:
its name, label, the states it applies to, the confirmation it asks, the
permission it needs, its parameter (a form) and its operation, on one loaded
job and on many ids at once. The job page, the list rows, selections, "select
all" batches and the producer API read these declarations; a new verb is one
more `Verb` here (and its wording in the docs).

Nothing here knows a page or a route: the readers hand a verb `Where` it acts
(a queue on their own Redis client, the GPU fleet) and turn `Refused` into
their own error (a 409 flash, a 409 JSON body)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django import forms

from gpu_workers import Fleet
from gpu_workers.exceptions import GpuWorkerError
from queues import Job, Queue, codec, ops
from queues.defaults import PRIORITY_LIMIT
from queues.drive import cmd, gather, guarded, run_sync
from queues.exceptions import QueueError
from queues.options import PY_TO_BULLMQ

#: The permission every job verb needs today (dashboard.console.models.OPERATE).
OPERATE = "dashboard.operate_queues"
#: Every state a job page may show ("unknown": a hash in no state's key).
ALL_STATES = frozenset(
    ("waiting", "prioritized", "delayed", "active", "waiting-children")
    + ("completed", "failed", "unknown")
)
#: The `form` attribute of detached parameter fields (no form has this id).
DETACHED = "detached-verb-params"
#: Options a duplicate keeps (ids, timing, dedup and flow links are not copied).
DUPLICATE_OPTIONS = tuple(
    "priority lifo attempts backoff remove_on_complete remove_on_fail "
    "stack_trace_limit keep_logs".split()
)


class Refused(Exception):
    """A verb left a job alone for a reason the operator should read: its
    state (`code` "state"), it is gone ("gone"), or the queue refused."""

    def __init__(self, message: str, code: str = "refused") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Where:
    """Where a verb acts: a (sync) queue on the reader's Redis client, and
    the GPU fleet on the same server (Cancel asks the job's GPU worker)."""

    queue: Queue
    fleet: Fleet


@dataclass(frozen=True)
class Acted:
    """What a verb did to one job."""

    message: str
    #: The job is gone (a page about it should send the operator elsewhere).
    gone: bool = False
    #: The id of a job the verb made (Duplicate).
    new_id: str | None = None
    #: The job's state when it was acted on.
    state: str = ""


#: A result per id of `Verb.on_ids`: True done, False gone, else the error.
Result = bool | Exception
Params = Mapping[str, Any]


class PriorityParams(forms.Form):
    """Change priority's parameter: the new priority (0 = none; 1 runs
    first; at most BullMQ's limit) and whether it goes first among equals."""

    priority = forms.IntegerField(
        min_value=0,
        max_value=PRIORITY_LIMIT,
        widget=forms.NumberInput({"class": "num"}),
    )
    lifo = forms.BooleanField(required=False, label="first among equals")


@dataclass(frozen=True)
class Verb:
    """One job verb."""

    name: str
    label: str
    #: What it does, in one line (docstrings, the API's summary).
    doc: str
    states: frozenset[str]
    #: On one loaded job (the page, a row, the API): (where, job, its state,
    #: params) -> Acted, or Refused.
    on_job: Callable[[Where, Job, str, Params], Acted]
    #: On many ids whose state allows it, in as few round trips as it can
    #: (a selection, a batch's chunk): one Result per id, in order.
    on_ids: Callable[[Where, Sequence[tuple[str, str]], Params], list[Result]]
    perm: str = OPERATE
    #: The question the browser asks first ("" for none); {what} names the
    #: job(s).
    confirm: str = ""
    #: It deletes or stops something: its button is red, and a page's POST
    #: must carry `confirm` (the API's DELETE is its own confirmation).
    danger: bool = False
    #: Its parameter, as a form (None: it takes none).
    params: type[forms.Form] | None = None
    #: States a "select all" batch may act on (empty: no batch).
    batch_states: frozenset[str] = frozenset()
    #: A batch moves jobs with BullMQ's bulk move (`move_jobs_to_wait_once`)
    #: instead of acting on each id.
    bulk_move: bool = False
    #: A job it acted on stays in its state (a batch's cursor moves past it).
    stays: bool = False
    #: It needs the job's whole data loaded (the others act by id).
    whole_job: bool = False

    @property
    def style(self) -> str:
        """Its button's class: red when it deletes or stops, plain when it
        asks first or takes a parameter, else the primary button."""
        if self.danger:
            return "danger"
        return "" if self.confirm or self.params else "primary"

    def applies_to(self, state: str) -> bool:
        """Whether a job in `state` may be acted on."""
        return state in self.states

    def question(self, what: str) -> str:
        """The confirmation asked before acting on `what` ("" for none)."""
        return self.confirm.format(what=what) if self.confirm else ""

    def clean(self, data: Any) -> dict[str, Any]:
        """The parameter from a form's (or a JSON body's) data; ValueError
        naming each bad field."""
        if self.params is None:
            return {}
        form = self.params(data)
        if not form.is_valid():
            parts = [
                ("" if name == "__all__" else f"{name}: ") + " ".join(map(str, errs))
                for name, errs in form.errors.items()
            ]
            raise ValueError("; ".join(parts))
        return dict(form.cleaned_data)

    def form(self, job: Job | None = None, detached: bool = False) -> forms.Form | None:
        """An unbound parameter form, filled from the job when given.
        `detached`: its fields belong to no HTML form (their `form`
        attribute names none), so fields in a list's rows and action bar
        never ride along with the list's own form; their button sends them
        (hx-include)."""
        if self.params is None:
            return None
        fields = self.params.base_fields
        initial = {n: getattr(job, n) for n in fields if hasattr(job, n)}
        form = self.params(initial=initial, auto_id=False)
        if detached:
            for bound in form.fields.values():
                bound.widget.attrs["form"] = DETACHED
        return form


def _run(where: Where, op: ops.Op) -> Any:
    return run_sync(op, where.queue.client)


def _each(where: Where, made: list[ops.Op]) -> list[Result]:
    """Ops side by side in one pipeline; a refused one is its error."""
    found = _run(where, gather([guarded(op) for op in made]))
    return [r if isinstance(r, QueueError) else r is not False for r in found]


def run_on_job(
    where: Where, verb: Verb, job_id: str, params: Params, cap: int | None
) -> Acted:
    """Load the job (values over `cap` bytes left out, unless the verb needs
    them whole), check its state, act. Refused when gone or in a state the
    verb does not apply to."""
    found, job_state = where.queue.get_job_with_state(
        job_id, None if verb.whole_job else cap
    )
    if found is None:
        key = f"{where.queue.prefix}:{where.queue.name}"
        raise Refused(f"job {job_id} no longer exists in {key}", "gone")
    state = job_state.value
    if not verb.applies_to(state):
        raise Refused(f"cannot {verb.name} job {job_id}: it is {state}", "state")
    return replace(verb.on_job(where, found, state, params), state=state)


# --- the operations -------------------------------------------------------------
def _retry(where: Where, job: Job, state: str, p: Params) -> Acted:
    job.retry(state)
    return Acted(f"retried job {job.id}")


def _retry_op(where: Where, job_id: str, state: str) -> ops.Op[int]:
    """Job.retry without reading the whole job: its `lifo` option only."""
    keys = where.queue.keys
    raw = yield from cmd("HGET", keys.job(job_id), "opts")
    try:
        opts = codec.loads(raw) if raw else {}
    except codec.JSONDecodeError:
        opts = {}
    lifo = bool(opts.get("lifo")) if isinstance(opts, dict) else False
    return (yield from ops.reprocess(keys, job_id, state, lifo, False, False))


def _retry_ids(where: Where, ids: Sequence[tuple[str, str]], p: Params) -> list[Result]:
    return _each(where, [_retry_op(where, i, s) for i, s in ids])


def _promote(where: Where, job: Job, state: str, p: Params) -> Acted:
    job.promote()
    return Acted(f"promoted job {job.id}")


def _promote_ids(
    where: Where, ids: Sequence[tuple[str, str]], p: Params
) -> list[Result]:
    return _each(where, [ops.promote(where.queue.keys, i) for i, _ in ids])


def _remove(where: Where, job: Job, state: str, p: Params) -> Acted:
    if not job.remove():
        raise Refused(f"job {job.id} no longer exists", "gone")
    return Acted(f"removed job {job.id}", gone=True)


def _remove_ids(
    where: Where, ids: Sequence[tuple[str, str]], p: Params
) -> list[Result]:
    return _each(where, [ops.remove(where.queue.keys, i) for i, _ in ids])


def _cancel(where: Where, job: Job, state: str, p: Params) -> Acted:
    q = where.queue
    where.fleet.request_cancel(q.name, job.id, q.prefix)
    return Acted(f"asked the worker to cancel job {job.id}")


def _cancel_ids(
    where: Where, ids: Sequence[tuple[str, str]], p: Params
) -> list[Result]:
    q, out = where.queue, list[Result]()
    for job_id, _ in ids:
        try:
            where.fleet.request_cancel(q.name, job_id, q.prefix)
            out.append(True)
        except (GpuWorkerError, QueueError) as exc:
            out.append(exc)
    return out


def _priority(where: Where, job: Job, state: str, p: Params) -> Acted:
    job.change_priority(p["priority"], p["lifo"])
    return Acted(f"set priority of job {job.id} to {p['priority']}")


def _priority_ids(
    where: Where, ids: Sequence[tuple[str, str]], p: Params
) -> list[Result]:
    keys, value, lifo = where.queue.keys, p["priority"], p["lifo"]
    return _each(where, [ops.change_priority(keys, i, value, lifo) for i, _ in ids])


def _kept_options(job: Job) -> dict[str, Any]:
    if job.malformed:
        raise Refused(f"job {job.id} cannot be duplicated: {job.malformed}")
    return {
        py: job.opts[bull]
        for py, bull in PY_TO_BULLMQ.items()
        if py in DUPLICATE_OPTIONS and job.opts.get(bull) is not None
    }


def _duplicate(where: Where, job: Job, state: str, p: Params) -> Acted:
    new = where.queue.add(job.name, job.data, **_kept_options(job))
    return Acted(f"duplicated job {job.id} as job {new.id}", new_id=str(new.id))


def _duplicate_ids(
    where: Where, ids: Sequence[tuple[str, str]], p: Params
) -> list[Result]:
    """Read the jobs in one pipeline, add the copies in one round trip."""
    q = where.queue
    hashes = _run(where, gather([cmd("HGETALL", q.keys.job(i)) for i, _ in ids]))
    out: list[Result] = []
    adds: list[dict[str, Any]] = []
    for (job_id, _), h in zip(ids, hashes):
        if not h:
            out.append(False)
            continue
        job = Job.from_hash(q, job_id, dict(h))
        try:
            adds.append(
                {"name": job.name, "data": job.data, "opts": _kept_options(job)}
            )
            out.append(True)
        except Refused as exc:
            out.append(exc)
    if adds:
        q.add_bulk(adds)
    return out


_PENDING = frozenset({"waiting", "prioritized", "delayed"})
VERBS: dict[str, Verb] = {
    v.name: v
    for v in (
        Verb(
            "retry",
            "Retry",
            "Move a failed or completed job back to wait.",
            frozenset({"failed", "completed"}),
            _retry,
            _retry_ids,
            batch_states=frozenset({"failed", "completed"}),
            bulk_move=True,
        ),
        Verb(
            "promote",
            "Promote",
            "Run a delayed job now.",
            frozenset({"delayed"}),
            _promote,
            _promote_ids,
            batch_states=frozenset({"delayed"}),
            bulk_move=True,
        ),
        Verb(
            "priority",
            "Change priority",
            "Change a pending job's priority (0 = none; 1 runs first).",
            _PENDING,
            _priority,
            _priority_ids,
            params=PriorityParams,
            batch_states=frozenset({"prioritized", "delayed"}),
            stays=True,
        ),
        Verb(
            "duplicate",
            "Duplicate",
            "Add a new job with the same name, data and retry options.",
            ALL_STATES,
            _duplicate,
            _duplicate_ids,
            confirm="Add a copy of {what}?",
            batch_states=frozenset({"prioritized", "delayed", "completed", "failed"}),
            stays=True,
            whole_job=True,
        ),
        Verb(
            "cancel",
            "Cancel",
            "Ask the GPU worker running a job to stop it (it ends failed).",
            frozenset({"active"}),
            _cancel,
            _cancel_ids,
            confirm="Ask the worker to cancel {what}? It will end failed.",
            danger=True,
        ),
        Verb(
            "remove",
            "Remove",
            "Delete a job that no worker holds.",
            ALL_STATES - {"active"},
            _remove,
            _remove_ids,
            confirm="Remove {what} for good?",
            danger=True,
            batch_states=frozenset(
                {"waiting", "prioritized", "delayed", "waiting-children"}
                | {"completed", "failed"}
            ),
        ),
    )
}


def offered(state: str) -> list[Verb]:
    """The verbs a job in `state` is offered, in the order they are shown."""
    return [v for v in VERBS.values() if v.applies_to(state)]
