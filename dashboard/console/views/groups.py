"""A queue's groups (docs/groups.md): the page of every group (paginated,
with a search by id), one group's page (settings, state, waiting jobs in
claim order) and the audited actions on a group: pause, resume, release a
hold (operate), its own weight, concurrency and rate limit, and its budget
of GPU-seconds a day (scale; gpu_workers/quota.py).

Group ids come from the URL: one that is not a group id, or names no group
of the queue, gets the site's 404 before any key is named with it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard.console import forms
from dashboard.shared import conf, discovery
from dashboard.shared import redis as pages_redis
from dashboard.shared.discovery import QueueRef
from queues.group_types import GroupSearch

from ..reads import groups as reads
from .common import (
    OPERATE,
    SCALE,
    VIEW,
    BadInput,
    Done,
    action,
    dispatch,
    int_param,
    perm_required,
    queue_ref,
)


def groups_url(ref: QueueRef) -> str:
    """The page of every group of a queue."""
    return reverse("bullpen:groups", args=[ref.prefix, ref.name])


def group_url(ref: QueueRef, group_id: str) -> str:
    """One group's page."""
    return reverse("bullpen:group", args=[ref.prefix, ref.name, group_id])


def may(request: HttpRequest, ref: QueueRef) -> dict[str, bool]:
    """Which group actions the page offers the user."""
    writable = not discovery.is_read_only(ref)
    return {
        "can_operate": writable and request.user.has_perm(OPERATE),
        "can_scale": writable and request.user.has_perm(SCALE),
    }


def _matches_page(
    request: HttpRequest,
    ref: QueueRef,
    wanted: str,
    rows: list[reads.GroupRow],
    matches: GroupSearch,
) -> HttpResponse:
    """The page of every group listing those whose id holds `wanted`."""
    context: dict[str, Any] = {
        "ref": ref,
        "rows": rows,
        "matches": matches,
        "wanted": wanted,
        "read_only": discovery.is_read_only(ref),
        "all_url": groups_url(ref),
        "here_url": f"{groups_url(ref)}?{urlencode({'id': wanted})}",
        **may(request, ref),
    }
    return render(request, "dashboard/groups.html", context)


def _pages(total: int, size: int) -> int:
    return max((total + size - 1) // size, 1)


@require_GET
@perm_required(VIEW)
def groups_page(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """Every group of a queue, largest backlog first, a page at a time; with
    `?id=`, that group's page, else the groups whose id holds it (or this
    page saying there is none)."""
    ref = queue_ref(prefix, name)
    wanted = request.GET.get("id", "").strip()
    message = ""
    size = conf.get().page_size
    if wanted:
        if not reads.valid_group_id(wanted):
            message = f"{wanted[:100]!r} is not a group id ({reads.GROUP_ID_RULE})"
        elif reads.group(ref, wanted) is not None:
            return HttpResponseRedirect(group_url(ref, wanted))
        else:
            rows, matches = reads.find_groups(ref, wanted, size)
            if rows:
                return _matches_page(request, ref, wanted, rows, matches)
            message = f"{ref.key} has no group {wanted!r}, nor one whose id holds it"
    page_no = int_param(request, "page", 1, 1)
    rows, total = reads.groups_page(ref, page_no, size)
    pages = _pages(total, size)
    if page_no > pages:  # past the end (groups emptied meanwhile): the last page
        page_no = pages
        rows, total = reads.groups_page(ref, page_no, size)
    context: dict[str, Any] = {
        "ref": ref,
        "rows": rows,
        "total": total,
        "page_no": page_no,
        "pages": pages,
        "wanted": wanted,
        "message": message,
        "read_only": discovery.is_read_only(ref),
        "here_url": groups_url(ref),
        **may(request, ref),
    }
    return render(
        request, "dashboard/groups.html", context, status=404 if message else 200
    )


@require_GET
@perm_required(VIEW)
def group_page(
    request: HttpRequest, prefix: str, name: str, group_id: str
) -> HttpResponse:
    """One group: its settings and state, its waiting jobs in claim order."""
    ref = queue_ref(prefix, name)
    found = _group(ref, group_id)
    size = conf.get().page_size
    waiting = int(found.info.waiting)
    pages = _pages(waiting, size)
    page_no = min(int_param(request, "page", 1, 1), pages)
    start = (page_no - 1) * size
    jobs = reads.group_jobs(ref, group_id, start, start + size - 1)
    context: dict[str, Any] = {
        "ref": ref,
        "g": found,
        "jobs": [(start + i + 1, job) for i, job in enumerate(jobs)],
        "page_no": page_no,
        "pages": pages,
        "read_only": discovery.is_read_only(ref),
        "here_url": group_url(ref, group_id),
        "audit_target": f"{ref.key}:{group_id}",
        **may(request, ref),
    }
    return render(request, "dashboard/group.html", context)


def _group(ref: QueueRef, group_id: str) -> reads.GroupRow:
    """The group named in the URL, or our 404."""
    if not reads.valid_group_id(group_id):
        raise Http404(f"Not a group id: {group_id[:100]!r}")
    found = reads.group(ref, group_id)
    if found is None:
        raise Http404(f"No such group: {group_id!r} in {ref.key}")
    return found


# --- actions -----------------------------------------------------------------
@action("group.pause", OPERATE)
def pause(request: HttpRequest, ref: QueueRef, group_id: str) -> Done:
    """Stop workers taking the group's jobs (they wait; nothing is lost)."""
    _group(ref, group_id)
    pages_redis.queue(ref.prefix, ref.name).pause_group(group_id)
    return Done(f"paused group {group_id} of {ref.key}", reload=True)


@action("group.resume", OPERATE)
def resume(request: HttpRequest, ref: QueueRef, group_id: str) -> Done:
    """Let workers take the group's jobs again."""
    _group(ref, group_id)
    pages_redis.queue(ref.prefix, ref.name).resume_group(group_id)
    return Done(f"resumed group {group_id} of {ref.key}", reload=True)


@action("group.release", OPERATE)
def release(request: HttpRequest, ref: QueueRef, group_id: str) -> Done:
    """End the group's hold (a quota, ...) before its time."""
    found = _group(ref, group_id)
    if not found.info.hold:
        raise BadInput(f"group {group_id} of {ref.key} is not held")
    pages_redis.queue(ref.prefix, ref.name).release_group(group_id)
    return Done(
        f"released the {found.info.hold!r} hold of group {group_id} of {ref.key}",
        reload=True,
    )


@action("group.settings", SCALE)
def settings(request: HttpRequest, ref: QueueRef, group_id: str) -> Done:
    """Set the group's own weight, concurrency and rate limit (blank clears
    one: the queue's group default applies)."""
    _group(ref, group_id)
    form = forms.GroupSettingsForm(request.POST)
    if not form.is_valid():
        raise BadInput(forms.errors_text(form))
    data = form.cleaned_data
    pages_redis.queue(ref.prefix, ref.name).set_group(
        group_id,
        weight=data["weight"],
        concurrency=data["concurrency"],
        rate_max=data["rate_max"],
        rate_duration_ms=data["rate_duration_ms"],
    )
    shown = forms.group_settings_text(data, "default")
    return Done(f"set group {group_id} of {ref.key}: {shown}", reload=True)


@action("group.budget", SCALE)
def budget(request: HttpRequest, ref: QueueRef, group_id: str) -> Done:
    """Set the group's GPU-seconds a day (blank removes the budget). A group
    past the new budget today is held; one held for its quota and now under
    it is released at once (Quotas.set_budget)."""
    found = _group(ref, group_id)
    form = forms.GroupBudgetForm(request.POST)
    if not form.is_valid():
        raise BadInput(forms.errors_text(form))
    seconds = form.cleaned_data["budget_s"]
    keys = pages_redis.queue(ref.prefix, ref.name).keys
    quota = reads.quotas().set_budget(keys, group_id, seconds)
    shown = "none" if seconds is None else f"{seconds:g} GPU-s a day"
    message = (
        f"set the budget of group {group_id} of {ref.key}: {shown} "
        f"(used today {quota.used_s:.3f} GPU-s)"
    )
    if quota.exhausted:
        message += "; it is used up: the group waits until the day turns"
    elif found.quota_held:
        message += "; its quota hold is released"
    return Done(message, reload=True)


ACTIONS = {
    "pause": pause,
    "resume": resume,
    "release": release,
    "settings": settings,
    "budget": budget,
}


@require_POST
def group_action(
    request: HttpRequest, prefix: str, name: str, group_id: str, verb: str
) -> HttpResponse:
    """POST /queues/<prefix>/<name>/groups/<id>/actions/<verb>/."""
    return dispatch(request, ACTIONS, verb, prefix, name, group_id)
