"""The charts' data: JSON series of a queue, of every queue together (the
overview) and of the GPUs, over `?range=1h|24h|7d` (charts.js draws them).

Unknown ranges answer 400 and unknown queues 404, as JSON an operator's
script can read; the numbers are Bullpen's own samples (gpu_workers/series),
so no job content is in them.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from gpu_workers.series import RANGES

from ..reads import charts
from ..reads.fleet_page import FleetFilter
from .common import VIEW, perm_required, queue_ref

DEFAULT_RANGE = "1h"


def _range(request: HttpRequest) -> str | None:
    wanted = request.GET.get("range", DEFAULT_RANGE)
    return wanted if wanted in RANGES else None


def _answer(request: HttpRequest, read: Any) -> HttpResponse:
    range_name = _range(request)
    if range_name is None:
        return JsonResponse(
            {"error": f"range must be one of {', '.join(RANGES)}"}, status=400
        )
    response = JsonResponse(read(range_name))
    response["Cache-Control"] = "no-store"
    return response


def _not_found(exc: Http404) -> HttpResponse:
    return JsonResponse({"error": str(exc)}, status=404)


@require_GET
@perm_required(VIEW)
def queue_series(request: HttpRequest, prefix: str, name: str) -> HttpResponse:
    """One queue's series."""
    try:
        ref = queue_ref(prefix, name)
    except Http404 as exc:
        return _not_found(exc)
    return _answer(request, lambda r: charts.queue_chart(ref, r))


@require_GET
@perm_required(VIEW)
def overall_series(request: HttpRequest) -> HttpResponse:
    """Every queue's series combined."""
    return _answer(request, charts.overall_chart)


@require_GET
@perm_required(VIEW)
def gpu_series(request: HttpRequest) -> HttpResponse:
    """Utilisation and committed VRAM per GPU of the hosts the GPU page
    shows with the same filters and page (its query string)."""
    flt = FleetFilter.from_query(request.GET)
    return _answer(request, lambda r: charts.gpu_chart(r, flt))
