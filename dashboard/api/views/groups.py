"""Groups of a queue (docs/groups.md), for admin tokens: the groups by
backlog, one group, a group's settings, pause and GPU-time budget
(gpu_workers/quota.py), and every group's defaults. Each change is audited
(dashboard/shared/audit.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from dashboard.shared import audit
from gpu_workers.quota import Quota, Quotas
from queues import Queue, ops
from queues.exceptions import QueueError
from queues.group_types import GroupInfo

from ...shared import conf
from .. import store
from ..exceptions import BadRequest, NotFound
from ..grouping import check_group_id
from ..groups_schema import GROUP_DEFAULTS_UPDATE, GROUP_UPDATE
from ..handling import Call, json_response
from ..operations import Param, operation
from ..validation import read_checked_body
from .common import queue_of

_GROUPS = "/queues/{queue}/groups"
_DEFAULTS = "/queues/{queue}/group-defaults"
_TAGS = ("groups",)
#: Groups one page may hold.
PAGE_MAX = 100
PAGE_DEFAULT = 20
#: The settings a body may carry, as `Queue.set_group` names them.
SETTINGS = ("weight", "concurrency", "rate_max", "rate_duration_ms")


def _settings_body(found: Any) -> dict[str, Any]:
    """A GroupSettings (or a dict of settings) as the API shows it."""
    if dataclasses.is_dataclass(found) and not isinstance(found, type):
        found = dataclasses.asdict(found)
    found = found if isinstance(found, dict) else {}
    return {name: found.get(name) for name in SETTINGS}


def _quotas() -> Quotas:
    return Quotas(store.client(), conf.get().namespace)


def quota_body(quota: Quota | None) -> dict[str, Any] | None:
    """A group's budget and use today as the API shows it."""
    if quota is None:
        return None
    return {
        "budget_s": quota.budget_s,
        "used_s": round(quota.used_s, 3),
        "exhausted": quota.exhausted,
        "until_ms": quota.until_ms,
    }


def group_body(
    queue: str, info: GroupInfo, quota: Quota | None = None
) -> dict[str, Any]:
    """A GroupInfo (and its quota) as the API shows it."""
    body: dict[str, Any] = {"id": info.id, "queue": queue}
    for name in (
        "waiting",
        "active",
        *SETTINGS,
        "paused",
        "hold",
        "hold_until_ms",
        "hold_info",
        "limited_until_ms",
        "in_rotation",
    ):
        body[name] = getattr(info, name, None)
    body["paused"] = bool(body["paused"])
    body["in_rotation"] = bool(body["in_rotation"])
    body["state"] = info.state(ops.now_ms())
    body["own"] = _settings_body(getattr(info, "own", None))
    body["quota"] = quota_body(quota)
    return body


def _int_param(request: HttpRequest, name: str, default: int, top: int) -> int:
    raw = request.GET.get(name)
    if raw is None:
        return default
    low = 1 if name == "limit" else 0
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= top:
        raise BadRequest("invalid_body", f"{name} must be a whole number {low}..{top}")
    return int(raw)


def _checked(request: HttpRequest, schema: dict[str, Any]) -> dict[str, Any]:
    checked: dict[str, Any] = read_checked_body(request, schema)  # an object
    return checked


def _audited(
    call: Call,
    queue: str,
    action: str,
    detail: str,
    act: Callable[[], object],
) -> None:
    """Run one change, recording it (and a refusal) in the audit log."""
    token = call.principal.token if call.principal is not None else None
    actor = f"api:{token.name} ({token.prefix})" if token is not None else "api"
    target = f"{conf.get().prefix}:{queue}"
    try:
        act()
    except (QueueError, ValueError, TypeError) as exc:
        audit.record(actor, target, action, "error", f"{detail}: {exc}")
        raise BadRequest("invalid_body", str(exc)) from None
    audit.record(actor, target, action, "ok", detail)


def _found(q: Queue, queue: str, group: str) -> dict[str, Any]:
    info = q.get_group(group)
    if info is None:
        raise NotFound("group_not_found", f"queue {queue} has no group {group}")
    return group_body(queue, info, _quotas().get_quota(q.keys, group))


@operation(
    method="GET",
    path=_GROUPS,
    operation_id="listGroups",
    summary="The queue's groups, largest backlog first, one page",
    description="With `contains`, only the groups whose id holds that text "
    "(the first `limit`; `total` counts every match, `complete` says whether "
    "the search went through the whole index).",
    scope="admin",
    params=(
        Param("offset", "query", {"type": "integer", "minimum": 0}, "Default 0."),
        Param(
            "contains",
            "query",
            {"type": "string", "minLength": 1, "maxLength": 100},
            "Part of a group id (the id rule's characters).",
        ),
        Param(
            "limit",
            "query",
            {"type": "integer", "minimum": 1, "maximum": PAGE_MAX},
            f"Default {PAGE_DEFAULT}.",
        ),
    ),
    responses={200: ("Groups", "GroupList")},
    tags=_TAGS,
)
def list_groups(request: HttpRequest, call: Call, queue: str) -> HttpResponse:
    """One page of `get_groups` and the count of every group."""
    offset = _int_param(request, "offset", 0, 10**9)
    limit = _int_param(request, "limit", PAGE_DEFAULT, PAGE_MAX)
    contains = request.GET.get("contains")
    q = queue_of(queue)
    complete = True
    if contains is not None:
        check_group_id(contains, "contains")
        if offset:
            raise BadRequest(
                "invalid_body", "contains lists the first `limit` matches: no offset"
            )
        search = q.find_groups(contains, limit)
        found, total, complete = search.groups, search.matched, search.complete
    else:
        found, total = q.get_groups_and_count(start=offset, end=offset + limit - 1)
    quotas = _quotas().get_quotas(q.keys, [info.id for info in found])
    return json_response(
        {
            "queue": queue,
            "total": total,
            "complete": complete,
            "offset": offset,
            "limit": limit,
            "groups": [group_body(queue, info, quotas.get(info.id)) for info in found],
        }
    )


@operation(
    method="GET",
    path=_GROUPS + "/{group}",
    operation_id="getGroup",
    summary="One group: its backlog, settings and state",
    scope="admin",
    responses={200: ("The group", "Group"), 404: ("No such group", None)},
    tags=_TAGS,
)
def get_group(request: HttpRequest, call: Call, queue: str, group: str) -> HttpResponse:
    """The group as it is now."""
    return json_response(_found(queue_of(queue), queue, group))


@operation(
    method="PATCH",
    path=_GROUPS + "/{group}",
    operation_id="updateGroup",
    summary="Change a group's settings (null clears one), pause or resume it, "
    "set its GPU-time budget",
    description="Only the fields sent change. A group need not have jobs yet. "
    "`budget_s` (GPU-seconds per UTC day, null removes it): a group past the "
    "new budget today is held for its quota, one under it is released at "
    "once. Audited.",
    scope="admin",
    request_schema="GroupUpdate",
    responses={200: ("The group now", "Group")},
    tags=_TAGS,
)
def update_group(
    request: HttpRequest, call: Call, queue: str, group: str
) -> HttpResponse:
    """set_group with the settings sent, then pause_group or resume_group."""
    body = _checked(request, GROUP_UPDATE)
    q = queue_of(queue)
    settings = {k: body[k] for k in SETTINGS if k in body}
    if settings:
        shown = ", ".join(f"{k}={v}" for k, v in settings.items())
        _audited(
            call,
            queue,
            "group.set",
            f"group {group}: {shown}",
            lambda: q.set_group(group, **settings),
        )
    if "budget_s" in body:
        seconds = body["budget_s"]
        _audited(
            call,
            queue,
            "group.budget",
            f"group {group}: budget_s={seconds}",
            lambda: _quotas().set_budget(q.keys, group, seconds),
        )
    if "paused" in body:
        verb = "pause" if body["paused"] else "resume"
        act = q.pause_group if body["paused"] else q.resume_group
        _audited(call, queue, f"group.{verb}", f"group {group}", lambda: act(group))
    return json_response(_found(q, queue, group))


@operation(
    method="GET",
    path=_DEFAULTS,
    operation_id="getGroupDefaults",
    summary="The settings every group without its own takes",
    scope="admin",
    responses={200: ("The defaults", "GroupDefaults")},
    tags=_TAGS,
)
def get_group_defaults(request: HttpRequest, call: Call, queue: str) -> HttpResponse:
    """get_group_defaults."""
    found = queue_of(queue).get_group_defaults()
    return json_response({"queue": queue, "defaults": _settings_body(found)})


@operation(
    method="PATCH",
    path=_DEFAULTS,
    operation_id="updateGroupDefaults",
    summary="Change the settings every group without its own takes (null clears)",
    description="Only the fields sent change. Audited.",
    scope="admin",
    request_schema="GroupDefaultsUpdate",
    responses={200: ("The defaults now", "GroupDefaults")},
    tags=_TAGS,
)
def update_group_defaults(request: HttpRequest, call: Call, queue: str) -> HttpResponse:
    """set_group_defaults with the settings sent."""
    body = _checked(request, GROUP_DEFAULTS_UPDATE)
    q = queue_of(queue)
    shown = ", ".join(f"{k}={v}" for k, v in body.items())
    _audited(
        call,
        queue,
        "group.defaults",
        f"defaults: {shown}",
        lambda: q.set_group_defaults(**body),
    )
    found = q.get_group_defaults()
    return json_response({"queue": queue, "defaults": _settings_body(found)})
