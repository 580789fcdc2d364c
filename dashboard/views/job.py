"""Job page (data, options, result, progress, logs, error, timeline, VRAM,
flow tree), its detail fragment, and the job actions allowed in its state."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard.api.webhooks import deliveries
from gpu_workers.units import format_bytes
from queues import Job, ops
from queues.options import PY_TO_BULLMQ

from .. import forms, reads
from ..display import (
    attempts_text,
    oddities,
    pretty,
    progress_parts,
    retry_text,
    too_large,
)
from ..models import AuditEntry
from ..reads import attempts as attempt_reads
from ..reads import job as job_reads
from ..reads import waiting as waiting_reads
from ..reads.discovery import QueueRef, is_read_only
from ..reads.job import JobDetail
from ..redaction import redact, redact_lines, redact_text
from ..shared import conf
from ..shared import redis as pages_redis
from .common import (
    OPERATE,
    VIEW,
    ActionError,
    BadInput,
    Done,
    action,
    dispatch,
    live_json,
    perm_required,
    queue_ref,
)

_ALL = frozenset(
    {
        "waiting",
        "prioritized",
        "delayed",
        "active",
        "waiting-children",
        "completed",
        "failed",
        "unknown",
    }
)
#: Job actions and the states they are offered in.
ALLOWED: dict[str, frozenset[str]] = {
    "retry": frozenset({"failed", "completed"}),
    "promote": frozenset({"delayed"}),
    "cancel": frozenset({"active"}),
    "priority": frozenset({"waiting", "prioritized", "delayed"}),
    "duplicate": _ALL,
    "remove": _ALL - {"active"},
}
#: Options a duplicate keeps (ids, timing, dedup and flow links are not copied).
DUPLICATE_OPTIONS = (
    "priority",
    "lifo",
    "attempts",
    "backoff",
    "remove_on_complete",
    "remove_on_fail",
    "stack_trace_limit",
    "keep_logs",
)


def timeline(job: Job, due_ms: int | None = None) -> list[tuple[str, int | None, str]]:
    """(label, epoch ms or duration ms, kind) rows: added, delayed until (the
    add's delay), started and finished (the latest attempt), runs at (a
    delayed job's due time), waited for, ran for."""
    rows: list[tuple[str, int | None, str]] = [("added", job.timestamp, "time")]
    # `delay` holds a retry's backoff once an attempt failed; opts keep the add's.
    delay = job.opts.get("delay")
    ready = job.timestamp + (delay if isinstance(delay, int) else 0)
    if ready > job.timestamp and ready != due_ms:
        rows.append(("delayed until", ready, "time"))
    if job.processed_on:
        rows.append(("started", job.processed_on, "time"))
    if job.finished_on:
        rows.append(("finished", job.finished_on, "time"))
    if due_ms is not None:
        rows.append(("runs at", due_ms, "time"))
    if job.processed_on:
        rows.append(("waited for", max(job.processed_on - ready, 0), "duration"))
    if job.processed_on and job.finished_on:
        rows.append(("ran for", job.finished_on - job.processed_on, "duration"))
    return rows


def detail_context(request: HttpRequest, ref: QueueRef, d: JobDetail) -> dict[str, Any]:
    """What the detail fragment renders (all job data redacted and escaped)."""
    job = d.job
    full = request.GET.get("full") == "1"
    cap = None if full else conf.get().data_detail_chars
    data_text, data_cut = pretty(redact(job.data), cap)
    result_text, result_cut = pretty(redact(job.returnvalue), cap)
    retry = retry_text(job, d.state)
    # A job waiting to retry: the progress it reported belongs to the failed
    # attempt, so none is shown until the next attempt reports.
    pct, progress_text = (None, "") if retry else progress_parts(redact(job.progress))
    allowed = {name for name, states in ALLOWED.items() if d.state in states}
    read_only = is_read_only(ref)
    vram = d.vram or {}
    return {
        "ref": ref,
        "job": job,
        "state": d.state,
        "live_key": f"{ref.key}:{job.id}",
        "data_text": data_text,
        "data_cut": data_cut,
        "data_left_out": too_large(job, "data"),
        "result_left_out": too_large(job, "returnvalue"),
        #: Other fields not loaded (failed reason, stack trace, progress...).
        "others_left_out": [
            (name, format_bytes(size))
            for name, size in sorted(job.left_out.items())
            if name not in ("data", "returnvalue")
        ],
        "opts_text": pretty(job.opts)[0],
        "result_text": result_text if job.returnvalue is not None else "",
        "result_cut": result_cut,
        "progress_pct": pct,
        "progress_text": progress_text,
        "logs": redact_lines(d.logs),
        "failed_reason": redact_text(job.failed_reason),
        "stacktrace": redact_lines(job.stacktrace),
        "odd": oddities(job),
        "log_total": d.log_total,
        "timeline": timeline(job, d.run_at_ms),
        "run_at_ms": d.run_at_ms,
        "run_in_ms": (d.run_at_ms or 0) - ops.now_ms(),
        "retry": retry,
        "attempts_text": attempts_text(job.attempts_made, job.attempts),
        "vram": vram,
        "attempts": attempts_shown(ref, job, d.state),
        **waiting_context(ref, job, d.state),
        "flow": d.flow,
        "parent_ref": d.parent_ref,
        "parent_id": d.parent_id,
        "allowed": allowed,
        "can_operate": request.user.has_perm(OPERATE) and not read_only,
        "read_only": read_only,
        "priority_form": forms.PriorityForm(initial={"priority": job.priority}),
        "job_url": reverse("bullpen:job", args=[ref.prefix, ref.name, job.id]),
        "detail_url": reverse(
            "bullpen:job-detail", args=[ref.prefix, ref.name, job.id]
        ),
        "full": full,
        "history": AuditEntry.objects.filter(target=f"{ref.key}:{job.id}")[:10],
        "deliveries": deliveries.for_dashboard(ref.prefix, ref.name, job.id),
    }


def attempts_shown(ref: QueueRef, job: Job, state: str) -> attempt_reads.Attempts:
    """The job's attempts (reads/attempts.py), their errors redacted."""
    attempts = attempt_reads.attempts_of(ref.prefix, ref.name, job, state)
    for row in attempts.rows:
        row["error"] = redact_text(row.get("error"))
        row["error_line"] = attempt_reads.first_line(row["error"])
    return attempts


def waiting_context(ref: QueueRef, job: Job, state: str) -> dict[str, Any]:
    """Why the job waits (reads/waiting.py), with links to pending children."""
    reason = waiting_reads.job_reason(ref, job, state)
    children = []
    for prefix, name, child_id in reason.children if reason else []:
        try:
            url = reverse("bullpen:job", args=[prefix, name, child_id])
        except NoReverseMatch:
            url = ""  # a name no page can have: shown, not linked
        children.append((f"{name} / {child_id}", url))
    return {
        "waiting": reason,
        "waiting_children": children,
        "waiting_stuck": reason is not None and reason.code in waiting_reads.STUCK,
        "waiting_gpu": reason is not None and reason.code in waiting_reads.GPU,
    }


def _detail(ref: QueueRef, job_id: str, whole: bool = False) -> JobDetail:
    d = job_reads.job_detail(ref, job_id, whole)
    if d is None:
        raise Http404(f"job {job_id} is not in {ref.key}")
    return d


@require_GET
@perm_required(VIEW)
def job_page(request: HttpRequest, prefix: str, name: str, job_id: str) -> HttpResponse:
    """One job with everything known about it and the actions its state allows."""
    ref = queue_ref(prefix, name)
    whole = request.GET.get("full") == "1"
    context = detail_context(request, ref, _detail(ref, job_id, whole))
    context["live_json"] = live_json(queues=[ref.key], jobs=[context["live_key"]])
    return render(request, "dashboard/job.html", context)


@require_GET
@perm_required(VIEW)
def job_detail(
    request: HttpRequest, prefix: str, name: str, job_id: str
) -> HttpResponse:
    """The job page's detail fragment (re-rendered on this job's events)."""
    ref = queue_ref(prefix, name)
    d = job_reads.job_detail(ref, job_id, request.GET.get("full") == "1")
    if d is None:
        # Replaces the polling fragment, which stops polling.
        return render(
            request,
            "dashboard/_flash.html",
            {"level": "info", "message": f"job {job_id} no longer exists in {ref.key}"},
        )
    return render(
        request, "dashboard/_job_detail.html", detail_context(request, ref, d)
    )


# --- actions -----------------------------------------------------------------
def _job(ref: QueueRef, job_id: str, verb: str) -> tuple[Job, str]:
    q = pages_redis.queue(ref.prefix, ref.name)
    # Only a duplicate needs the job's data; the other actions act by id, so a
    # job holding megabytes is not copied out of Redis to retry or remove it.
    cap = None if verb == "duplicate" else conf.get().list_value_max_bytes
    job, job_state = q.get_job_with_state(job_id, cap)
    if job is None:
        raise ActionError(f"job {job_id} no longer exists in {ref.key}")
    state = job_state.value
    if state not in ALLOWED[verb]:
        raise ActionError(f"cannot {verb} job {job_id}: it is {state}")
    return job, state


def _confirmed(request: HttpRequest) -> None:
    if not forms.ConfirmForm(request.POST).is_valid():
        raise BadInput("confirm the action first")


@action("job.retry", OPERATE)
def retry(request: HttpRequest, ref: QueueRef, job_id: str) -> Done:
    """Move a failed or completed job back to wait."""
    job, state = _job(ref, job_id, "retry")
    job.retry(state)
    return Done(f"retried job {job_id}")


@action("job.promote", OPERATE)
def promote(request: HttpRequest, ref: QueueRef, job_id: str) -> Done:
    """Run a delayed job now."""
    job, _ = _job(ref, job_id, "promote")
    job.promote()
    return Done(f"promoted job {job_id}")


@action("job.remove", OPERATE)
def remove(request: HttpRequest, ref: QueueRef, job_id: str) -> Done:
    """Delete a job that no worker holds."""
    _confirmed(request)
    job, _ = _job(ref, job_id, "remove")
    if not job.remove():
        raise ActionError(f"job {job_id} no longer exists")
    return Done(
        f"removed job {job_id}",
        redirect=reverse("bullpen:queue", args=[ref.prefix, ref.name]),
    )


@action("job.cancel", OPERATE)
def cancel(request: HttpRequest, ref: QueueRef, job_id: str) -> Done:
    """Ask the GPU worker running a job to stop it (it ends failed)."""
    _confirmed(request)
    _job(ref, job_id, "cancel")
    reads.gpu_fleet().request_cancel(ref.name, job_id, ref.prefix)
    return Done(f"asked the worker to cancel job {job_id}")


@action("job.priority", OPERATE)
def priority(request: HttpRequest, ref: QueueRef, job_id: str) -> Done:
    """Change a pending job's priority."""
    form = forms.PriorityForm(request.POST)
    if not form.is_valid():
        raise BadInput(forms.errors_text(form))
    job, _ = _job(ref, job_id, "priority")
    value, lifo = form.cleaned_data["priority"], form.cleaned_data["lifo"]
    job.change_priority(value, lifo)
    return Done(f"set priority of job {job_id} to {value}")


@action("job.duplicate", OPERATE)
def duplicate(request: HttpRequest, ref: QueueRef, job_id: str) -> Done:
    """Add a new job with the same name, data and retry options."""
    job, _ = _job(ref, job_id, "duplicate")
    if job.malformed:
        raise ActionError(f"job {job_id} cannot be duplicated: {job.malformed}")
    options = {
        py: job.opts[bull]
        for py, bull in PY_TO_BULLMQ.items()
        if py in DUPLICATE_OPTIONS and job.opts.get(bull) is not None
    }
    new = pages_redis.queue(ref.prefix, ref.name).add(job.name, job.data, **options)
    return Done(f"duplicated job {job_id} as job {new.id}")


ACTIONS = {
    "retry": retry,
    "promote": promote,
    "remove": remove,
    "cancel": cancel,
    "priority": priority,
    "duplicate": duplicate,
}


@require_POST
def job_action(
    request: HttpRequest, prefix: str, name: str, job_id: str, verb: str
) -> HttpResponse:
    """POST /queues/<prefix>/<name>/jobs/<id>/actions/<verb>/."""
    return dispatch(request, ACTIONS, verb, prefix, name, job_id)
