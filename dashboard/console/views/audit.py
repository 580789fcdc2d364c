"""Audit log page: recent operator actions, newest first, filterable by target
and by action (`<what>.<verb>`, or a family such as `job.`); details shown
redacted (the redaction hook)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..models import AuditEntry
from ..reads.schedulers import shown_detail
from .common import VIEW, perm_required

PAGE_SIZE = 100


@require_GET
@perm_required(VIEW)
def audit_log(request: HttpRequest) -> HttpResponse:
    """Who did what to which queue or job, and how it went."""
    target = request.GET.get("target", "").strip()[:400]
    entries = AuditEntry.objects.all()
    if target:
        # The target itself and what is under it (a queue's jobs), not
        # `bull:render2` for `bull:render`.
        entries = entries.filter(Q(target=target) | Q(target__startswith=target + ":"))
    action = request.GET.get("action", "").strip()[:64]
    if action:
        # One action (`job.retry`) or a family of them (`job.`, `workers.`).
        entries = entries.filter(action__startswith=action)
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    # Details pass through the redaction hook as shown: a pause written before
    # pauses were redacted holds its scheduler's whole template.
    rows = [(e, shown_detail(e.detail)) for e in page.object_list]
    context = {"page": page, "rows": rows, "target": target, "action": action}
    return render(request, "dashboard/audit.html", context)
