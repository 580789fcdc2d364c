"""Job page (data, options, result, progress, logs, error, timeline, VRAM,
flow tree), its detail fragment, and the job actions allowed in its state
(one view per verb declared in shared/verbs.py)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard.console import forms
from dashboard.shared import conf, verbs
from dashboard.shared.discovery import QueueRef, is_read_only
from dashboard.shared.panels import job_panels
from dashboard.shared.redaction import redact, redact_lines, redact_text
from dashboard.shared.verbs import VERBS, Verb
from gpu_workers.units import format_bytes
from queues import Job, ops

from ..bulk.selection import where
from ..display import (
    attempts_text,
    job_group,
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
from ..reads.job import JobDetail
from .common import (
    OPERATE,
    VIEW,
    ActionError,
    BadInput,
    Done,
    View,
    action,
    dispatch,
    live_json,
    perm_required,
    queue_ref,
)


def timeline(job: Job, due_ms: int | None = None) -> list[tuple[str, int | None, str]]:
    """(label, epoch ms or duration ms, kind) rows: added, delayed until (the
    add's delay), started and finished (the latest attempt), runs at (a
    delayed job's due time), waited for, ran for. Past a first attempt the
    rows of the latest one say which it is: its wait counts from the add,
    earlier attempts and backoffs included."""
    attempt = job.attempts_started or job.attempts_made
    nth = f"attempt {attempt} " if attempt > 1 else ""
    rows: list[tuple[str, int | None, str]] = [("added", job.timestamp, "time")]
    # `delay` holds a retry's backoff once an attempt failed; opts keep the add's.
    delay = job.opts.get("delay")
    ready = job.timestamp + (delay if isinstance(delay, int) else 0)
    if ready > job.timestamp and ready != due_ms:
        rows.append(("delayed until", ready, "time"))
    if job.processed_on:
        rows.append((nth + "started", job.processed_on, "time"))
    if job.finished_on:
        rows.append((f"{nth}ended" if nth else "finished", job.finished_on, "time"))
    if due_ms is not None:
        rows.append(("runs at", due_ms, "time"))
    if job.processed_on:
        waited = f"until attempt {attempt}" if nth else "waited for"
        rows.append((waited, max(job.processed_on - ready, 0), "duration"))
    if job.processed_on and job.finished_on:
        ran = f"{nth}ran" if nth else "ran for"
        rows.append((ran, job.finished_on - job.processed_on, "duration"))
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
        "group_id": job_group(job),
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
        "job_verbs": [
            {"verb": v, "form": v.form(job), "question": v.question("this job")}
            for v in verbs.offered(d.state)
        ],
        "can_operate": request.user.has_perm(OPERATE) and not read_only,
        "read_only": read_only,
        "job_url": reverse("bullpen:job", args=[ref.prefix, ref.name, job.id]),
        "detail_url": reverse(
            "bullpen:job-detail", args=[ref.prefix, ref.name, job.id]
        ),
        "full": full,
        "history": AuditEntry.objects.filter(target=f"{ref.key}:{job.id}")[:10],
        "panels": job_panels(ref.prefix, ref.name, job.id),
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
def params_of(request: HttpRequest, verb: Verb) -> dict[str, Any]:
    """The verb's confirmation (when it is destructive) and its parameter,
    from the POST; BadInput when either is missing or invalid."""
    if verb.danger and not forms.ConfirmForm(request.POST).is_valid():
        raise BadInput("confirm the action first")
    try:
        return verb.clean(request.POST)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def _make(verb: Verb) -> View:
    def act(request: HttpRequest, ref: QueueRef, job_id: str) -> Done:
        params = params_of(request, verb)
        cap = conf.get().list_value_max_bytes  # only a duplicate reads all
        try:
            acted = verbs.run_on_job(where(ref), verb, job_id, params, cap)
        except verbs.Refused as exc:
            raise ActionError(str(exc)) from None
        back = reverse("bullpen:queue", args=[ref.prefix, ref.name])
        return Done(acted.message, redirect=back if acted.gone else None)

    act.__name__ = act.__qualname__ = verb.name
    act.__doc__ = verb.doc
    return action(f"job.{verb.name}", verb.perm)(act)


#: One action view per declared verb.
ACTIONS = {name: _make(verb) for name, verb in VERBS.items()}


@require_POST
def job_action(
    request: HttpRequest, prefix: str, name: str, job_id: str, verb: str
) -> HttpResponse:
    """POST /queues/<prefix>/<name>/jobs/<id>/actions/<verb>/."""
    return dispatch(request, ACTIONS, verb, prefix, name, job_id)
