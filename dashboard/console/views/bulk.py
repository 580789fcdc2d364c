"""Acting on many jobs of the queue page: the selected ids (one request),
every job matching the tab (a batch, run in the background, with its
progress fragment and Cancel), and the JSON Lines export of either."""

from __future__ import annotations

import json
import re
from typing import Any, cast

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard.console import audit
from dashboard.shared.discovery import QueueRef
from dashboard.shared.verbs import VERBS, Verb
from queues import ops
from queues.keys import QueueKeys

from ..bulk import export, records, runner, selection, steps
from ..bulk.records import Batch
from ..reads import queue as queue_reads
from .common import (
    OPERATE,
    VIEW,
    ActionError,
    BadInput,
    Done,
    action,
    dispatch,
    not_found,
    perm_required,
    queue_ref,
)
from .job import params_of
from .lists import batch_context
from .queue import TABS


def _selected(request: HttpRequest, ref: QueueRef, verb: Verb) -> Done:
    params = params_of(request, verb)
    try:
        ids = selection.clean_ids(request.POST.getlist("ids"))
    except selection.SelectionError as exc:
        raise BadInput(str(exc)) from None
    outcome = selection.act(ref, verb, ids, params)
    message = outcome.message(verb.name)
    if not outcome.done:
        raise ActionError(message)
    return Done(message)


def _batch(request: HttpRequest, ref: QueueRef, verb: Verb) -> Done:
    """Start a batch over every job of the tab's state as it is now."""
    params = params_of(request, verb)
    state = request.POST.get("state", "")
    if state not in verb.batch_states:
        raise BadInput(f"cannot {verb.name} all jobs of the {state or 'given'} tab")
    batch_id, now = records.new_id(), ops.now_ms()
    if records.reserve(ref.prefix, ref.name, batch_id, now) is not None:
        raise ActionError(f"a batch runs on {ref.key} already: cancel it or wait")
    snap = steps.snapshot(QueueKeys(ref.name, ref.prefix), state, now)
    if not snap.total:
        records.release(ref.prefix, ref.name, batch_id)
        raise ActionError(f"no {state} jobs in {ref.key}")
    batch = Batch(
        id=batch_id,
        prefix=ref.prefix,
        queue=ref.name,
        verb=verb.name,
        state=state,
        bound=snap.bound,
        total=snap.total,
        params=json.dumps(params) if params else "",
        mark=snap.mark,
        username=request.user.get_username(),
        started_ms=now,
    )
    batch = records.create(batch)
    entry = audit.record(
        request, ref.key, f"batch.{verb.name}", "ok", runner.describe(batch)
    )
    batch.audit_id = entry.pk
    records.save(batch, "audit_id")
    runner.ensure_started()
    message = f"started: {verb.name} all {snap.total} {state} job(s) of {ref.key}"
    return Done(message, audited=True)


def _make(verb: Verb, batch: bool) -> Any:
    name = f"batch.{verb.name}" if batch else f"jobs.{verb.name}"

    def act(request: HttpRequest, ref: QueueRef) -> Done:
        return _batch(request, ref, verb) if batch else _selected(request, ref, verb)

    act.__name__ = act.__qualname__ = name.replace(".", "_")
    whom = "every job of the tab" if batch else "the selected jobs"
    act.__doc__ = f"{verb.name} {whom}: {verb.doc}"
    return action(name, verb.perm)(act)


#: The declared verbs on the selected jobs, and on all of a tab (a batch).
SELECTED = {name: _make(verb, False) for name, verb in VERBS.items()}
BATCHES = {name: _make(verb, True) for name, verb in VERBS.items() if verb.batch_states}


@require_POST
def bulk_action(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """POST the selection form: `verb`, and `scope` "page" (the `ids`) or
    "all" (every job of `state`, as a batch)."""
    verb = request.POST.get("verb", "")
    views = BATCHES if request.POST.get("scope") == "all" else SELECTED
    return dispatch(request, views, verb, prefix, name, what="action on many jobs")


# --- the batch's progress and Cancel -----------------------------------------
@require_GET
@perm_required(VIEW)
def batch_fragment(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """The batch's progress bar (polled while it runs)."""
    ref = queue_ref(prefix, name)
    context = batch_context(ref)
    context["ref"] = ref
    context["can_operate"] = request.user.has_perm(OPERATE)
    return render(request, "dashboard/_batch.html", context)


@action("batch.cancel", OPERATE)
def _cancel(request: HttpRequest, ref: QueueRef, batch_id: str) -> Done:
    """Stop a running batch after its current chunk; its audit row says so."""
    batch = records.load(batch_id)
    if batch is None or batch.key != ref.key:
        raise ActionError(f"no batch {batch_id} on {ref.key}")
    if not batch.running:
        raise ActionError(f"batch {batch_id} has ended already ({batch.status})")
    records.request_cancel(batch, request.user.get_username())
    if records.claim(batch.id, runner.owner_id()):  # nobody runs it: end it here
        runner.finish(batch, records.CANCELLED)
    return Done(f"cancelling the batch on {ref.key}", audited=True)


@require_POST
def batch_cancel(
    request: HttpRequest, prefix: str, name: str, batch_id: str
) -> HttpResponse:
    """POST /queues/<prefix>/<name>/batches/<id>/actions/cancel/."""
    response: HttpResponse = _cancel(request, prefix, name, batch_id)
    return response


# --- export --------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
@perm_required(VIEW)
def export_jobs(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """The selected jobs (POST `ids`), or (`scope` "all", what a GET means)
    every job of the tab, as JSON Lines, streamed; one audit row. A GET is a
    plain download URL: `export/?state=failed&order=oldest`."""
    ref = queue_ref(prefix, name)
    params = request.POST if request.method == "POST" else request.GET
    tab = params.get("state", "latest")
    if tab not in TABS:
        return not_found(request, f"no such tab: {tab}")
    if request.method == "GET" or params.get("scope") == "all":
        states = TABS[tab]
        counts = queue_reads.queue_counts([ref], *states)[0]
        total = sum(counts.get(s, 0) for s in states)
        asc = params.get("order") == "oldest"
        lines = export.matching(ref, states, total, asc)
        what = f"all {total} {tab} job(s)"
    else:
        try:
            ids = selection.clean_ids(request.POST.getlist("ids"))
        except selection.SelectionError as exc:
            return _bad(request, str(exc))
        lines = export.selected(ref, ids)
        what = f"{len(ids)} selected job(s)"
    audit.record(request, ref.key, "jobs.export", "ok", f"exported {what}")
    response = StreamingHttpResponse(lines, content_type="application/jsonl")
    filename = re.sub(r"[^A-Za-z0-9._-]", "_", f"{ref.prefix}-{ref.name}-{tab}.jsonl")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    # perm_required's views answer HttpResponse; Django serves this one alike.
    return cast(HttpResponse, response)


def _bad(request: HttpRequest, message: str) -> HttpResponse:
    return render(
        request,
        "dashboard/_flash.html",
        {"level": "error", "message": message},
        status=400,
    )
