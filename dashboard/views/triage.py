"""Failure triage: a queue's failed jobs grouped by normalised reason (a
bounded, resumable window at a time), with retry-the-group."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from ..forms import RetryGroupForm, errors_text
from ..reads import scan
from ..reads.discovery import QueueRef, is_read_only, user_queues
from ..reads.queue import queue_counts
from ..shared import conf
from .common import (
    OPERATE,
    VIEW,
    BadInput,
    Done,
    action,
    int_param,
    live_json,
    not_found,
    perm_required,
    queue_ref,
)


@require_GET
@perm_required(VIEW)
def triage_index(request: HttpRequest) -> HttpResponse:
    """Queues with failed jobs, to pick one to triage."""
    refs = user_queues()
    counts = queue_counts(refs, "failed") if refs else []
    rows = sorted(
        ((r, c["failed"]) for r, c in zip(refs, counts)), key=lambda rc: (-rc[1], rc[0])
    )
    return render(request, "dashboard/triage_index.html", {"rows": rows})


@require_GET
@perm_required(VIEW)
def triage(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """Failed jobs of one queue grouped by reason, `cap` jobs per request."""
    ref = queue_ref(prefix, name)
    cursor = int_param(request, "cursor", 0, 0)
    window, groups = scan.triage(ref, cursor)
    return render(
        request,
        "dashboard/triage.html",
        {
            "ref": ref,
            "window": window,
            "groups": groups,
            "cap": conf.get().scan_cap,
            "scanned_to": window.start + window.scanned,
            "read_only": is_read_only(ref),
            "can_operate": request.user.has_perm(OPERATE),
            "live_json": live_json(queues=[ref.key]),
        },
    )


@action("triage.retry_group", OPERATE)
def retry_group(request: HttpRequest, ref: QueueRef) -> Done:
    """Retry the failed jobs of one group that still fail for that reason."""
    form = RetryGroupForm(request.POST)
    if not form.is_valid():
        raise BadInput(errors_text(form))
    retried, skipped = scan.retry_group(
        ref, form.cleaned_data["ids"], form.cleaned_data["signature"]
    )
    return Done(
        f"retried {retried} job(s) of group {form.cleaned_data['signature']}"
        + (f"; skipped {skipped} no longer failed that way" if skipped else ""),
        reload=True,
    )


@require_POST
def triage_action(
    request: HttpRequest, prefix: str, name: str, verb: str
) -> HttpResponse:
    """POST /triage/<prefix>/<name>/actions/<verb>/."""
    if verb != "retry-group":
        return not_found(request, f"no such action: {verb}")
    return retry_group(request, prefix, name)
