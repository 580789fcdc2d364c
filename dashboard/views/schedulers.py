"""The job schedulers page of a queue and its audited actions: create, edit,
run now, pause, restore and remove.

BullMQ has no paused state for a scheduler, so "pause" removes it (as Node
would) and its audit row keeps the whole definition; the page lists such
schedulers with a Restore button that re-creates them from that row. A
definition too large for an audit row cannot be paused, only removed.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from queues.scheduler import JobScheduler

from .. import audit, forms
from ..reads import discovery
from ..reads import schedulers as reads
from ..reads.discovery import QueueRef
from ..redaction import keep_unchanged
from ..scheduler_forms import SchedulerForm, add_kwargs, initial_of, local_zone
from ..shared import conf
from ..shared import redis as pages_redis
from .common import (
    OPERATE,
    VIEW,
    BadInput,
    Done,
    action,
    dispatch,
    int_param,
    perm_required,
    queue_ref,
)


@require_GET
@perm_required(VIEW)
def schedulers_page(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """A queue's schedulers, soonest next run first, paginated."""
    ref = queue_ref(prefix, name)
    page_no = int_param(request, "page", 1, 1)
    size = conf.get().page_size
    rows, total = reads.schedulers_page(ref, page_no, size)
    pages = max((total + size - 1) // size, 1)
    return render(
        request,
        "dashboard/schedulers.html",
        {
            "ref": ref,
            "rows": rows,
            "total": total,
            "page_no": page_no,
            "pages": pages,
            "paused": reads.paused(ref),
            "read_only": discovery.is_read_only(ref),
            "can_operate": request.user.has_perm(OPERATE),
            "new_form": SchedulerForm(),
            "local_zone": local_zone(),
        },
    )


def _valid(data: Any) -> SchedulerForm:
    form = SchedulerForm(data)
    if not form.is_valid():
        raise BadInput(forms.errors_text(form))
    return form


def _existing(ref: QueueRef, scheduler_id: str) -> JobScheduler:
    found = pages_redis.queue(ref.prefix, ref.name).get_job_scheduler(scheduler_id)
    if found is None:
        raise BadInput(f"no scheduler {scheduler_id!r} in {ref.key}")
    return found


def _write(
    ref: QueueRef, form: SchedulerForm, verb: str, stored: JobScheduler | None = None
) -> Done:
    """Write the scheduler the form describes (template data left as shown
    keeping `stored`'s values); what was done, with its next run, back to the
    schedulers page."""
    d = form.cleaned_data
    sid = d["scheduler_id"]
    kwargs = form.upsert_kwargs()
    if stored is not None:
        data = kwargs["template"]["data"]
        kwargs["template"]["data"] = keep_unchanged(data, stored.template.get("data"))
    job = pages_redis.queue(ref.prefix, ref.name).upsert_job_scheduler(sid, **kwargs)
    nxt = f"next job {job.id}" if job else "no run left within its limit"
    how = f"every {d['every_ms']} ms" if d["every_ms"] else f"cron {d['pattern']!r}"
    how += f" tz {d['tz']}" if d["tz"] else ""
    return Done(f"{verb} scheduler {sid} ({how}); {nxt}", redirect=schedulers_url(ref))


@action("scheduler.create", OPERATE)
def create(request: HttpRequest, ref: QueueRef) -> Done:
    """Add a scheduler under a new id."""
    form = _valid(request.POST)
    sid = form.cleaned_data["scheduler_id"]
    if pages_redis.queue(ref.prefix, ref.name).get_job_scheduler(sid):
        raise BadInput(f"{sid!r} exists already: edit it instead")
    return _write(ref, form, "created")


@action("scheduler.edit", OPERATE)
def edit(request: HttpRequest, ref: QueueRef, scheduler_id: str) -> Done:
    """Replace a scheduler's definition (its id stays)."""
    stored = _existing(ref, scheduler_id)
    form = _valid({**request.POST.dict(), "scheduler_id": scheduler_id})
    return _write(ref, form, "edited", stored)


@action("scheduler.run", OPERATE)
def run_now(request: HttpRequest, ref: QueueRef, scheduler_id: str) -> Done:
    """Add one job from the template now; the schedule is left as it is."""
    s = _existing(ref, scheduler_id)
    try:
        options = add_kwargs(dict(s.template.get("opts") or {}))
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    data = s.template.get("data", {})
    job = pages_redis.queue(ref.prefix, ref.name).add(s.name, data, **options)
    return Done(f"ran scheduler {scheduler_id} now: job {job.id}")


@action("scheduler.pause", OPERATE)
def pause(request: HttpRequest, ref: QueueRef, scheduler_id: str) -> Done:
    """Remove the scheduler, its definition kept in the audit row."""
    s = _existing(ref, scheduler_id)
    kept = reads.pause_definition(ref, s)
    definition = reads.PAUSED_PREFIX + json.dumps(kept, ensure_ascii=False)
    if len(definition) > audit.DETAIL_CHARS:
        reads.forget_kept(ref, scheduler_id)
        raise BadInput(
            f"{scheduler_id}'s definition is too large to keep in the audit log "
            f"({len(definition)} > {audit.DETAIL_CHARS} characters): remove it instead"
        )
    pages_redis.queue(ref.prefix, ref.name).remove_job_scheduler(scheduler_id)
    return Done(
        f"paused scheduler {scheduler_id} (removed; restore it below)",
        detail=definition,
        redirect=schedulers_url(ref),
    )


@action("scheduler.restore", OPERATE)
def restore(request: HttpRequest, ref: QueueRef, scheduler_id: str) -> Done:
    """Re-create a paused scheduler from its audited definition."""
    try:
        kept = reads.paused_definition(ref, scheduler_id)
    except reads.KeptCopyMissing as exc:
        raise BadInput(str(exc)) from exc
    if kept is None:
        raise BadInput(f"{scheduler_id!r} was not paused here")
    if pages_redis.queue(ref.prefix, ref.name).get_job_scheduler(scheduler_id):
        raise BadInput(f"{scheduler_id!r} exists again: nothing to restore")
    initial = initial_of(kept)
    form = _valid({k: "" if v is None else v for k, v in initial.items()})
    done = _write(ref, form, "restored")
    reads.forget_kept(ref, scheduler_id)
    return done


@action("scheduler.remove", OPERATE)
def remove(request: HttpRequest, ref: QueueRef, scheduler_id: str) -> Done:
    """Delete the scheduler and its next iteration for good."""
    if not pages_redis.queue(ref.prefix, ref.name).remove_job_scheduler(scheduler_id):
        raise BadInput(f"no scheduler {scheduler_id!r} in {ref.key}")
    return Done(f"removed scheduler {scheduler_id}", redirect=schedulers_url(ref))


ITEM_ACTIONS = {
    "edit": edit,
    "run": run_now,
    "pause": pause,
    "restore": restore,
    "remove": remove,
}


@require_POST
def create_action(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """POST /queues/<prefix>/<name>/schedulers/actions/create/."""
    return create(request, prefix, name)


@require_POST
def scheduler_action(
    request: HttpRequest, prefix: str, name: str, scheduler_id: str, verb: str
) -> HttpResponse:
    """POST /queues/<prefix>/<name>/schedulers/<id>/actions/<verb>/."""
    return dispatch(request, ITEM_ACTIONS, verb, prefix, name, scheduler_id)


def schedulers_url(ref: QueueRef) -> str:
    """The schedulers page of a queue."""
    return reverse("bullpen:schedulers", args=[ref.prefix, ref.name])
