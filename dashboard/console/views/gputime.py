"""The GPU-time page (GPU-seconds and VRAM-GiB-seconds by queue, job name or
tenant over a range of UTC hours or days) and its CSV export: one row per
bucket and key, the figures unrounded, as a billing report is."""

from __future__ import annotations

import csv
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..reads import gputime
from .common import VIEW, perm_required

#: What a spreadsheet would run as a formula at the start of a cell.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: str) -> str:
    """A key (a job name or tenant another client chose) safe in a spreadsheet."""
    return "'" + text if text.startswith(_FORMULA_START) and text != "-" else text


@require_GET
@perm_required(VIEW)
def gpu_time_page(request: HttpRequest) -> HttpResponse:
    """The whole page."""
    choice = gputime.Choice.parse(request.GET)
    context: dict[str, Any] = {
        "view": gputime.gpu_time(choice),
        "ranges": list(gputime.RANGES),
        "groups": gputime.GROUPS,
        "group_label": gputime.GROUPS[choice.group],
    }
    return render(request, "dashboard/gputime.html", context)


@require_GET
@perm_required(VIEW)
def gpu_time_csv(request: HttpRequest) -> HttpResponse:
    """The same range and grouping as CSV, one row per bucket and key."""
    choice = gputime.Choice.parse(request.GET)
    view = gputime.gpu_time(choice, with_rows=True)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    name = f"bullpen-gpu-time-{choice.group}-{choice.range}-{choice.period}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    out = csv.writer(response)
    out.writerow(
        [
            "bucket_start_utc",
            "period",
            choice.group,
            "gpu_seconds",
            "vram_gib_seconds",
            "attempts",
            "simulated_gpu_seconds",
        ]
    )
    for bucket in reversed(view.buckets):
        rows = sorted(bucket.rows.values(), key=lambda r: (-r.gpu_seconds, r.key))
        for row in rows:
            out.writerow(
                [
                    bucket.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    choice.period,
                    _cell(row.key),
                    f"{row.gpu_seconds:.3f}",
                    f"{row.vram_gib_seconds:.3f}",
                    row.attempts,
                    f"{row.simulated_seconds:.3f}",
                ]
            )
    return response
