"""Queue page: tabs per state with counts, the paginated job list fragment, and
the queue actions (pause, resume, retry/promote all, clean, drain, obliterate,
global concurrency and rate limit)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard.console import forms
from dashboard.shared import conf, discovery
from dashboard.shared import redis as pages_redis
from dashboard.shared.discovery import QueueRef
from queues import ops

from ..display import job_row
from ..reads import groups as group_reads
from ..reads import queue as queue_reads
from ..reads import waiting as waiting_reads
from ..reads.job import due_times
from . import groups, lists
from .common import (
    OPERATE,
    SCALE,
    VIEW,
    BadInput,
    Done,
    action,
    dispatch,
    int_param,
    is_htmx,
    live_json,
    perm_required,
    queue_ref,
)

#: Tabs of the queue page and the states each lists (latest: every state).
TABS: dict[str, tuple[str, ...]] = {
    "latest": (
        "active",
        "waiting",
        "prioritized",
        "delayed",
        "waiting-children",
        "failed",
        "completed",
    ),
    "active": ("active",),
    "waiting": ("waiting",),
    "prioritized": ("prioritized",),
    "delayed": ("delayed",),
    "waiting-children": ("waiting-children",),
    "completed": ("completed",),
    "failed": ("failed",),
}


def list_context(
    request: HttpRequest, ref: QueueRef, counts: dict[str, int] | None = None
) -> dict[str, Any]:
    """The job list of the tab, page and order in the query string."""
    tab = request.GET.get("state", "latest")
    if tab not in TABS:
        raise Http404("no such tab")
    states = TABS[tab]
    order = "oldest" if request.GET.get("order") == "oldest" else "newest"
    page_no = int_param(request, "page", 1, 1)
    if counts is None:
        counts = queue_reads.queue_counts([ref], *states)[0]
    total = sum(counts.get(s, 0) for s in states)
    size = conf.get().page_size
    pages = max((total + size - 1) // size, 1)
    page_no = min(page_no, pages)
    start = (page_no - 1) * size
    pairs = queue_reads.page_with_states(
        ref, states, start, start + size - 1, order == "oldest"
    )
    now = ops.now_ms()
    due = due_times(ref, [j.id for j, s in pairs if s == "delayed"])
    rows = [job_row(j, s, ref.key, now, due.get(j.id)) for j, s in pairs]
    why = waiting_reads.reasons(ref, pairs)
    for row in rows:
        reason = why.get(row.id)
        if reason is not None:
            row.waiting_tag = waiting_reads.tag(reason)
            row.waiting_message = reason.message
            row.waiting_code = reason.code
            row.waiting_stuck = reason.code in waiting_reads.STUCK
    base = reverse("bullpen:queue", args=[ref.prefix, ref.name])
    return {
        **lists.verbs(tab, states),
        "ref": ref,
        "tab": tab,
        "order": order,
        "page_no": page_no,
        "pages": pages,
        "total": total,
        "rows": rows,
        "list_url": reverse("bullpen:queue-jobs", args=[ref.prefix, ref.name]),
        "base_url": base,
        "query": f"state={tab}&order={order}",
    }


@require_GET
@perm_required(VIEW)
def queue_page(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """A queue: counts per state as tabs, its job list, its actions."""
    ref = queue_ref(prefix, name)
    header = queue_reads.queue_header(ref)
    context = list_context(request, ref, header.counts)
    context.update(
        can_operate=_can_operate(request, ref),
        header=header,
        # (tab, count, its states): live.js adds up a tab of several states.
        tabs=[
            (t, sum(header.counts.get(s, 0) for s in s_), " ".join(s_))
            for t, s_ in TABS.items()
        ],
        read_only=discovery.is_read_only(ref),
        internal=ref in discovery.internal_queues(),
        can_scale=request.user.has_perm(SCALE),
        clean_form=forms.CleanForm(initial={"state": "completed", "grace_s": 3600}),
        drain_form=forms.DrainForm(),
        obliterate_form=forms.ObliterateForm(queue_name=ref.name),
        live_json=live_json(queues=[ref.key]),
        groups=group_reads.group_panel(ref),
        group_may=groups.may(request, ref),
        **lists.batch_context(ref),
    )
    return render(request, "dashboard/queue.html", context)


@require_GET
@perm_required(VIEW)
def job_list(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """The job list fragment (htmx re-renders it on queue events)."""
    ref = queue_ref(prefix, name)
    context = list_context(request, ref)
    context["fragment"] = is_htmx(request)
    context["can_operate"] = _can_operate(request, ref)
    return render(request, "dashboard/_job_list.html", context)


def _can_operate(request: HttpRequest, ref: QueueRef) -> bool:
    """Whether the list offers row actions, selection verbs and batches."""
    return request.user.has_perm(OPERATE) and not discovery.is_read_only(ref)


# --- actions -----------------------------------------------------------------
def _form(form_class: type, request: HttpRequest, **kwargs: Any) -> Any:
    form = form_class(request.POST, **kwargs)
    if not form.is_valid():
        raise BadInput(forms.errors_text(form))
    return form.cleaned_data


@action("queue.pause", OPERATE)
def pause(request: HttpRequest, ref: QueueRef) -> Done:
    """Stop workers taking new jobs."""
    pages_redis.queue(ref.prefix, ref.name).pause()
    return Done(f"paused {ref.key}", reload=True)


@action("queue.resume", OPERATE)
def resume(request: HttpRequest, ref: QueueRef) -> Done:
    """Let workers take jobs again."""
    pages_redis.queue(ref.prefix, ref.name).resume()
    return Done(f"resumed {ref.key}", reload=True)


@action("queue.retry_failed", OPERATE)
def retry_failed(request: HttpRequest, ref: QueueRef) -> Done:
    """Move every job that failed before now back to wait, in batches."""
    q = pages_redis.queue(ref.prefix, ref.name)
    before = q.get_counts("failed")["failed"]
    q.retry_jobs("failed")
    return Done(f"retried {before} failed job(s) of {ref.key}", reload=True)


@action("queue.promote_all", OPERATE)
def promote_all(request: HttpRequest, ref: QueueRef) -> Done:
    """Move every delayed job to wait, in batches."""
    q = pages_redis.queue(ref.prefix, ref.name)
    before = q.get_counts("delayed")["delayed"]
    q.promote_jobs()
    return Done(f"promoted {before} delayed job(s) of {ref.key}", reload=True)


@action("queue.clean", OPERATE)
def clean(request: HttpRequest, ref: QueueRef) -> Done:
    """Delete jobs of one state older than the grace period."""
    data = _form(forms.CleanForm, request)
    removed = pages_redis.queue(ref.prefix, ref.name).clean(
        data["grace_s"] * 1000, data["limit"] or 0, data["state"]
    )
    return Done(
        f"cleaned {len(removed)} {data['state']} job(s) older than "
        f"{data['grace_s']} s from {ref.key}",
        reload=True,
    )


@action("queue.drain", OPERATE)
def drain(request: HttpRequest, ref: QueueRef) -> Done:
    """Delete waiting and prioritized jobs (and delayed ones when asked)."""
    data = _form(forms.DrainForm, request)
    pages_redis.queue(ref.prefix, ref.name).drain(delayed=data["delayed"])
    extra = ", delayed" if data["delayed"] else ""
    return Done(f"drained {ref.key} (waiting, prioritized{extra})", reload=True)


@action("queue.obliterate", OPERATE)
def obliterate(request: HttpRequest, ref: QueueRef) -> Done:
    """Delete the queue and every job in it; only a paused queue."""
    data = _form(forms.ObliterateForm, request, queue_name=ref.name)
    q = pages_redis.queue(ref.prefix, ref.name)
    if not q.is_paused():
        raise BadInput(f"pause {ref.key} before obliterating it")
    q.obliterate(force=data["force"])
    return Done(f"obliterated {ref.key}", redirect=reverse("bullpen:overview"))


@action("queue.concurrency", SCALE)
def concurrency(request: HttpRequest, ref: QueueRef) -> Done:
    """Set or lift the global concurrency limit."""
    value = _form(forms.ConcurrencyForm, request)["concurrency"]
    q = pages_redis.queue(ref.prefix, ref.name)
    if value is None:
        q.remove_global_concurrency()
        return Done(f"lifted the global concurrency limit of {ref.key}", reload=True)
    q.set_global_concurrency(value)
    return Done(f"set global concurrency of {ref.key} to {value}", reload=True)


@action("queue.rate_limit", SCALE)
def rate_limit(request: HttpRequest, ref: QueueRef) -> Done:
    """Set or lift the global rate limit."""
    data = _form(forms.RateLimitForm, request)
    q = pages_redis.queue(ref.prefix, ref.name)
    if data["max"] is None:
        q.remove_global_rate_limit()
        return Done(f"lifted the global rate limit of {ref.key}", reload=True)
    q.set_global_rate_limit(data["max"], data["duration_ms"])
    return Done(
        f"set rate limit of {ref.key} to {data['max']} per {data['duration_ms']} ms",
        reload=True,
    )


@action("group.defaults", SCALE)
def group_defaults(request: HttpRequest, ref: QueueRef) -> Done:
    """Set the weight, concurrency and rate limit every group of the queue
    uses unless it sets its own (blank clears one)."""
    data = _form(forms.GroupSettingsForm, request)
    pages_redis.queue(ref.prefix, ref.name).set_group_defaults(**data)
    shown = forms.group_settings_text(data, "none")
    return Done(f"set the group defaults of {ref.key}: {shown}", reload=True)


ACTIONS = {
    "pause": pause,
    "resume": resume,
    "retry-failed": retry_failed,
    "promote-all": promote_all,
    "clean": clean,
    "drain": drain,
    "obliterate": obliterate,
    "concurrency": concurrency,
    "rate-limit": rate_limit,
    "group-defaults": group_defaults,
}


@require_POST
def queue_action(
    request: HttpRequest, prefix: str, name: str, verb: str
) -> HttpResponse:
    """POST /queues/<prefix>/<name>/actions/<verb>/."""
    return dispatch(request, ACTIONS, verb, prefix, name)
