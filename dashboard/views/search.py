"""Job search: by id at once (across every queue), or a bounded, resumable scan
of one state of one queue filtered by name, data substring or JSON path."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from queues import ops

from ..display import job_row
from ..forms import SearchForm, errors_text
from ..reads import scan
from ..reads.discovery import QueueRef, user_queues
from ..reads.job import find_job
from ..shared import conf
from .common import VIEW, is_htmx, perm_required


def _by_id(job_id: str, refs: list[QueueRef]) -> list[QueueRef]:
    return find_job(refs, job_id) if refs else []


def search_context(request: HttpRequest) -> dict[str, Any]:
    """The form and, when it was submitted, what it found."""
    known = user_queues()
    # Opened empty, the form is set to something it can run at once: the
    # first queue (a scan needs one; "any queue" is for a job id only).
    initial = {"queue": known[0].key} if known else {}
    form = SearchForm(
        request.GET or None, queues=[r.key for r in known], initial=initial
    )
    context: dict[str, Any] = {"form": form, "cap": conf.get().scan_cap}
    if not form.is_bound:
        return context
    if not form.is_valid():
        context["error"] = errors_text(form)
        return context
    data = form.cleaned_data
    chosen = [r for r in known if r.key == data["queue"]]
    if data["job_id"]:
        refs = chosen or known
        context["id_hits"] = [(r, data["job_id"]) for r in _by_id(data["job_id"], refs)]
        context["searched_id"] = data["job_id"]
        return context
    if not chosen:
        context["error"] = "choose a queue to scan (or give a job id)"
        return context
    try:
        keep = scan.matcher(data["name"], data["text"], data["path"], data["value"])
    except scan.BadPath as exc:
        context["error"] = str(exc)
        return context
    ref, state = chosen[0], data["state"] or "failed"
    found = scan.scan(
        ref, state, data["cursor"] or 0, keep, max_matches=conf.get().page_size
    )
    now = ops.now_ms()
    query = request.GET.copy()
    if found.next_cursor is not None:
        query["cursor"] = str(found.next_cursor)
    context.update(
        ref=ref,
        result=found,
        rows=[job_row(j, state, ref.key, now) for j in found.jobs],
        continue_query=query.urlencode() if found.next_cursor is not None else "",
        scanned_to=found.start + found.scanned,
    )
    return context


@require_GET
@perm_required(VIEW)
def search(request: HttpRequest) -> HttpResponse:
    """The search page; a single id hit goes straight to the job."""
    context = search_context(request)
    hits = context.get("id_hits")
    if hits is not None and len(hits) == 1 and not is_htmx(request):
        ref, job_id = hits[0]
        return redirect(reverse("bullpen:job", args=[ref.prefix, ref.name, job_id]))
    template = (
        "dashboard/_search_results.html"
        if is_htmx(request)
        else "dashboard/search.html"
    )
    return render(request, template, context)
