"""GPU workers page: a summary and a grid of every GPU (coloured by
utilisation or VRAM), filters by host, queue, model and state, then per host
of the chosen page and GPU a VRAM gauge (used, committed by admission,
budget, total), readings, the models resident on it (a stacked bar, loads,
evictions, pins), each worker with its running jobs (live progress), scaling
and pin controls for users with the scale permission, and a capacity view."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef
from gpu_workers.exceptions import ValidationError
from queues.drive import cmd

from .. import reads
from ..reads import fleet, fleet_page
from .common import (
    SCALE,
    VIEW,
    BadInput,
    Done,
    action,
    gpu_action,
    live_json,
    perm_required,
)


def _context(request: HttpRequest, with_capacity: bool = True) -> dict[str, Any]:
    # The snapshot may be up to BULLPEN_FLEET_MAX_AGE_S old: one command
    # checks that Redis answers now, so an outage is the 503 page, never a
    # fleet that looks live.
    reads.run(cmd("PING"))
    snap = reads.fleet_snapshot()
    flt = fleet_page.FleetFilter.from_query(request.GET)
    page = fleet_page.host_page(snap, flt)
    hosts = fleet.hosts(snap=snap, names=page.names, gpus=page.gpus)
    capacity = fleet.capacity(snap) if with_capacity else []
    queues = sorted({row.queue.key for row in capacity})
    return {
        "snap": snap,
        "summary": snap.summary,
        "filter": flt,
        "page": page,
        "prev_query": flt.query(page=page.number - 1) if page.number > 1 else None,
        "next_query": (
            flt.query(page=page.number + 1) if page.number < page.pages else None
        ),
        "choices": fleet_page.choices(snap),
        "hosts": hosts,
        "capacity": capacity,
        "can_scale": request.user.has_perm(SCALE),
        "window_min": fleet.THROUGHPUT_WINDOW_MIN,
        "max_age_s": conf.get().fleet_max_age_s,
        # Counts of the served queues and progress of their jobs update live;
        # the grid applies the workers stream's changed cells, and the cards
        # re-render when a shown host changed (gpus.js).
        "live_json": live_json(queues=queues, gpus=True),
    }


@require_GET
@perm_required(VIEW)
def gpus_page(request: HttpRequest) -> HttpResponse:
    """The whole page: summary, grid, filters, a page of hosts' cards."""
    return render(request, "dashboard/gpus.html", _context(request))


@require_GET
@perm_required(VIEW)
def hosts_fragment(request: HttpRequest) -> HttpResponse:
    """The hosts panel alone, same filters (htmx re-fetches it when a shown
    host changed)."""
    return render(
        request, "dashboard/_gpu_hosts.html", _context(request, with_capacity=False)
    )


@require_GET
@perm_required(VIEW)
def capacity_fragment(request: HttpRequest) -> HttpResponse:
    """The capacity table alone."""
    snap = reads.fleet_snapshot()
    return render(
        request,
        "dashboard/_gpu_capacity.html",
        {"capacity": fleet.capacity(snap), "window_min": fleet.THROUGHPUT_WINDOW_MIN},
    )


@require_GET
@perm_required(VIEW)
def grid_json(request: HttpRequest) -> JsonResponse:
    """Every GPU as a compact cell (gpus.js draws the grid), the filters'
    matches, and the snapshot's time, which live diffs start from."""
    snap = reads.fleet_snapshot()
    flt = fleet_page.FleetFilter.from_query(request.GET)
    return JsonResponse(fleet_page.grid(snap, flt))


def _count(request: HttpRequest, field: str, low: int) -> int | None:
    raw = request.POST.get(field, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise BadInput(f"{field} must be a whole number, not {raw[:20]!r}") from None
    if value < low:
        raise BadInput(f"{field} must be at least {low}")
    return value


# Scaling writes only Bullpen's own keys, for a queue that workers serve
# (Fleet checks host and queue), which may have no keys of its own yet.
@action("workers.scale", SCALE, must_exist=False)
def _scale(request: HttpRequest, ref: QueueRef) -> Done:
    host = request.POST.get("host", "").strip()
    workers = _count(request, "workers", 0)
    slots = _count(request, "slots", 1)
    if workers is None and slots is None:
        raise BadInput("give a number of workers, of slots, or both")
    try:
        result = reads.gpu_fleet().set_desired(
            host, ref.name, workers=workers, slots=slots, prefix=ref.prefix
        )
    except ValidationError as exc:
        raise BadInput(str(exc)) from None
    wanted = ", ".join(f"{k} {v}" for k, v in sorted(result.items()))
    return Done(f"{host}: {ref.key} set to {wanted}; the supervisor converges in ~2 s")


@require_POST
def scale(request: HttpRequest) -> HttpResponse:
    """POST host, queue (`prefix:name`), workers and/or slots: desired counts
    for one host and queue (Fleet.set_desired), audited; scale permission."""
    prefix, _, name = request.POST.get("queue", "").rpartition(":")
    return _scale(request, prefix, name)


def _pin_model(request: HttpRequest) -> str:
    model = request.POST.get("model", "").strip()
    if not model:
        raise BadInput("give a model name")
    return model


# Pins write only Bullpen's `models:pins` hash (Fleet validates both names);
# the GPU's worker loads a pinned model and keeps it (residency.py).
@gpu_action("models.pin", SCALE)
def pin(request: HttpRequest, gpu: str) -> Done:
    """POST gpu (uuid) and model: pin the model on the GPU, audited; the
    scale permission, like scaling."""
    model = _pin_model(request)
    try:
        pins = reads.gpu_fleet().pin_model(gpu, model)
    except ValidationError as exc:
        raise BadInput(str(exc)) from None
    return Done(f"{model} pinned on GPU {gpu} (pins: {', '.join(pins)})")


@gpu_action("models.unpin", SCALE)
def unpin(request: HttpRequest, gpu: str) -> Done:
    """POST gpu (uuid) and model: drop the pin, audited; scale permission."""
    model = _pin_model(request)
    try:
        pins = reads.gpu_fleet().unpin_model(gpu, model)
    except ValidationError as exc:
        raise BadInput(str(exc)) from None
    left = ", ".join(pins) or "none"
    return Done(f"{model} unpinned from GPU {gpu} (pins left: {left})")
