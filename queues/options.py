"""Job options: validation, BullMQ's stored `opts` JSON (short keys), backoff
and retention (docs/protocol.md §2.1)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from typing import Any, Union

from . import defaults
from .exceptions import InvalidJobId, InvalidJobOptions
from .keys import names_queue_key
from .names import GROUP_ID_RULE, is_group_id

#: Long public names and the short keys BullMQ stores them under.
SHORT_KEYS = {
    "deduplication": "de",
    "failParentOnFailure": "fpof",
    "continueParentOnFailure": "cpof",
    "ignoreDependencyOnFailure": "idof",
    "removeDependencyOnFailure": "rdof",
    "keepLogs": "kl",
}
LONG_KEYS = {v: k for k, v in SHORT_KEYS.items()}

#: Python keyword arguments of `add` and the BullMQ option names they map to.
PY_TO_BULLMQ = {
    "job_id": "jobId",
    "priority": "priority",
    "delay": "delay",
    "lifo": "lifo",
    "attempts": "attempts",
    "backoff": "backoff",
    "remove_on_complete": "removeOnComplete",
    "remove_on_fail": "removeOnFail",
    "timestamp": "timestamp",
    "stack_trace_limit": "stackTraceLimit",
    "keep_logs": "keepLogs",
    "size_limit": "sizeLimit",
    "deduplication": "deduplication",
    "fail_parent_on_failure": "failParentOnFailure",
    "continue_parent_on_failure": "continueParentOnFailure",
    "ignore_dependency_on_failure": "ignoreDependencyOnFailure",
    "remove_dependency_on_failure": "removeDependencyOnFailure",
    # Not BullMQ's: who queued the job, for GPU-time accounting (BullMQ keeps
    # and ignores an opts key it does not know; docs/bullmq-compat.md).
    "tenant": "tenant",
    # Not BullMQ's either: the job's group (docs/groups.md), stored as BullMQ
    # Pro's `{"id": ...}`.
    "group": "group",
}
#: The longest `tenant` (a non-secret name, e.g. an API token's).
TENANT_MAX_CHARS = 100
#: Options Bullpen stamps itself, never taken from options a person typed (a
#: scheduler template, a form, the CLI): `tenant` bills GPU time and only the
#: HTTP API sets it, from its token (`Queue.add(..., tenant=...)` is that
#: stamping path); the rest a job scheduler writes on its iterations. Python
#: and BullMQ names alike (they are the same for `tenant`).
STAMPED_OPTIONS = frozenset(
    {"tenant", "repeat", "repeatJobKey", "repeat_job_key", "prevMillis", "rjk"}
)

_INTEGER_LIKE = re.compile(r"[+-]?[0-9]+")

KeepJobs = Union[bool, int, Mapping[str, int], None]
BackoffSpec = Union[int, Mapping[str, Any], None]
#: A custom strategy: (attempts_made, type, error, job) -> delay ms; -1 = no retry.
BackoffStrategy = Callable[[int, str, BaseException, Any], "int | float | None"]


def validate_job_id(job_id: str) -> str:
    """Check a custom id by BullMQ's client rules (docs/protocol.md §7), and refuse ids
    whose job hash would be one of the queue's own keys."""
    if not isinstance(job_id, str) or job_id == "":
        raise InvalidJobId("job_id must be a non-empty string")
    # Node refuses ids that parseInt reads back unchanged; Bullpen also refuses
    # zero-padded and signed ones, which read as numbers everywhere else.
    if _INTEGER_LIKE.fullmatch(job_id):
        raise InvalidJobId(f"custom job id {job_id!r} cannot be an integer")
    if job_id.startswith("0:"):
        raise InvalidJobId(f"custom job id {job_id!r} cannot start with '0:'")
    if ":" in job_id and len(job_id.split(":")) != 3:
        raise InvalidJobId(
            f"custom job id {job_id!r} cannot contain ':' (except repeat:id:millis)"
        )
    if names_queue_key(job_id):
        raise InvalidJobId(
            f"custom job id {job_id!r} names one of the queue's own keys"
        )
    return job_id


def refuse_stamped(options: Mapping[str, Any]) -> None:
    """Raise InvalidJobOptions naming any option Bullpen stamps itself
    (`STAMPED_OPTIONS`) that `options` holds."""
    stamped = sorted(k for k in options if k in STAMPED_OPTIONS)
    if stamped:
        raise InvalidJobOptions(
            f"{', '.join(stamped)} cannot be set here: Bullpen stamps "
            f"{'it' if len(stamped) == 1 else 'them'} itself"
        )


def normalize_backoff(backoff: BackoffSpec) -> dict[str, Any] | None:
    """A bare number n becomes {type: fixed, delay: n}; dicts are checked."""
    if backoff is None:
        return None
    if isinstance(backoff, bool):
        raise InvalidJobOptions("backoff must be a number of ms or a dict")
    if isinstance(backoff, (int, float)):
        return {"type": "fixed", "delay": int(backoff)}
    if isinstance(backoff, Mapping):
        spec = dict(backoff)
        if not isinstance(spec.get("type"), str):
            raise InvalidJobOptions(
                "backoff needs a 'type' (fixed, exponential or custom)"
            )
        delay = spec.get("delay", 0)
        if not isinstance(delay, (int, float)) or delay < 0:
            raise InvalidJobOptions("backoff 'delay' must be a number of ms >= 0")
        jitter = spec.get("jitter")
        if jitter is not None and not (
            isinstance(jitter, (int, float)) and 0 <= jitter <= 1
        ):
            raise InvalidJobOptions("backoff 'jitter' must be between 0 and 1")
        return spec
    raise InvalidJobOptions("backoff must be a number of ms or a dict")


#: BullMQ allows at most one of these per job (`Job.validateOptions`).
FAILURE_OPTIONS = (
    "failParentOnFailure",
    "continueParentOnFailure",
    "ignoreDependencyOnFailure",
    "removeDependencyOnFailure",
)
_DEDUP_KEYS = {
    "id": "id",
    "ttl": "ttl",
    "extend": "extend",
    "replace": "replace",
    "reschedule": "reschedule",
    "keep_last_if_active": "keepLastIfActive",
    "keepLastIfActive": "keepLastIfActive",
}


def normalize_deduplication(spec: Any) -> dict[str, Any]:
    """`{id, ttl?, extend?, replace?, reschedule?, keep_last_if_active?}` as
    BullMQ stores `de`."""
    if not isinstance(spec, Mapping):
        raise InvalidJobOptions("deduplication must be a dict with an 'id'")
    unknown = set(spec) - set(_DEDUP_KEYS)
    if unknown:
        raise InvalidJobOptions(f"deduplication has unknown keys {sorted(unknown)}")
    de = {_DEDUP_KEYS[k]: v for k, v in spec.items() if v not in (None, False)}
    if not isinstance(de.get("id"), str) or not de["id"]:
        raise InvalidJobOptions("deduplication id must be a non-empty string")
    ttl = de.get("ttl")
    if ttl is not None and (
        not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0
    ):
        raise InvalidJobOptions("deduplication ttl must be an integer of ms >= 0")
    for flag in ("extend", "replace", "reschedule", "keepLastIfActive"):
        if flag in de and de[flag] is not True:
            raise InvalidJobOptions(f"deduplication {flag} must be a bool")
    return de


def _check_keep(name: str, value: KeepJobs) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if value < 0:
            raise InvalidJobOptions(f"{name} count must be >= 0")
        return
    if isinstance(value, Mapping):
        unknown = set(value) - {"count", "age", "limit"}
        if unknown:
            raise InvalidJobOptions(f"{name} has unknown keys {sorted(unknown)}")
        for k, v in value.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InvalidJobOptions(f"{name}.{k} must be an integer >= 0")
        return
    raise InvalidJobOptions(f"{name} must be a bool, a count or {{count, age, limit}}")


def build_opts(**kwargs: Any) -> dict[str, Any]:
    """Turn `add` keyword arguments into BullMQ's stored opts (short keys)."""
    unknown = set(kwargs) - set(PY_TO_BULLMQ)
    if unknown:
        raise InvalidJobOptions(f"unknown job options: {', '.join(sorted(unknown))}")
    # Unset attempts is stored as 0, as Node and Python BullMQ write it (both mean
    # "one attempt").
    opts: dict[str, Any] = {"attempts": 0, "delay": 0}
    for py_name, value in kwargs.items():
        if value is None:
            continue
        opts[PY_TO_BULLMQ[py_name]] = value
    attempts = opts["attempts"]
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 0:
        raise InvalidJobOptions("attempts must be an integer >= 0")
    delay = opts["delay"]
    if not isinstance(delay, (int, float)) or isinstance(delay, bool) or delay < 0:
        raise InvalidJobOptions("delay must be a number of ms >= 0")
    opts["delay"] = int(delay)
    priority = opts.get("priority", 0)
    if (
        not isinstance(priority, int)
        or isinstance(priority, bool)
        or not 0 <= priority <= defaults.PRIORITY_LIMIT
    ):
        raise InvalidJobOptions(
            f"priority must be an integer between 0 and {defaults.PRIORITY_LIMIT}"
        )
    if not priority:
        opts.pop("priority", None)
    if "jobId" in opts:
        validate_job_id(opts["jobId"])
    tenant = opts.get("tenant")
    if tenant is not None and (
        not isinstance(tenant, str) or not 0 < len(tenant) <= TENANT_MAX_CHARS
    ):
        raise InvalidJobOptions(
            f"tenant must be a string of 1-{TENANT_MAX_CHARS} characters"
        )
    if "group" in opts:
        group = opts["group"]
        if isinstance(group, Mapping) and set(group) == {"id"}:
            group = group["id"]
        if not is_group_id(group):
            raise InvalidJobOptions(f"group must be {GROUP_ID_RULE}")
        opts["group"] = {"id": group}
    if opts.get("lifo") is False:
        del opts["lifo"]
    if "backoff" in opts:
        opts["backoff"] = normalize_backoff(opts["backoff"])
    for name in ("removeOnComplete", "removeOnFail"):
        if name in opts:
            if opts[name] is False:
                del opts[name]
            else:
                _check_keep(name, opts[name])
    failure = [name for name in FAILURE_OPTIONS if opts.get(name)]
    if len(failure) > 1:
        raise InvalidJobOptions(
            f"the following options cannot be used together: {', '.join(failure)}"
        )
    for name in FAILURE_OPTIONS:
        if name in opts and not opts[name]:
            del opts[name]
    if "deduplication" in opts:
        opts["deduplication"] = normalize_deduplication(opts["deduplication"])
    for long, short in SHORT_KEYS.items():
        if long in opts:
            opts[short] = opts.pop(long)
    return opts


#: The `add` options a queue may default (BullMQ's `DefaultJobOptions`).
DEFAULTABLE_OPTIONS = frozenset(
    {
        "priority",
        "delay",
        "attempts",
        "backoff",
        "lifo",
        "remove_on_complete",
        "remove_on_fail",
        "timestamp",
        "stack_trace_limit",
        "keep_logs",
        "size_limit",
    }
)


def check_default_job_options(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """A queue's default job options, checked as `add` checks its own."""
    options = dict(given or {})
    unknown = set(options) - DEFAULTABLE_OPTIONS
    if unknown:
        raise InvalidJobOptions(
            f"options a queue cannot default: {', '.join(sorted(unknown))}"
        )
    build_opts(**options)
    return options


def merge_job_options(
    queue_defaults: Mapping[str, Any], options: Mapping[str, Any]
) -> dict[str, Any]:
    """A job's options over its queue's defaults, as BullMQ 6 merges them: key
    by key, a key the job gives (even as None) replaces the default whole."""
    return {**queue_defaults, **options}


def decode_opts(stored: Mapping[str, Any]) -> dict[str, Any]:
    """Stored opts with short keys expanded to BullMQ's long names."""
    return {LONG_KEYS.get(k, k): v for k, v in stored.items()}


def keep_jobs(value: Any, fallback: Any = None) -> dict[str, int]:
    """BullMQ `getKeepJobs`: true -> count 0, false/unset -> count -1 (keep all)."""
    if value is None:
        value = fallback
    if value is True:
        return {"count": 0}
    if value is None or value is False:
        return {"count": -1}
    if isinstance(value, (int, float)):
        return {"count": int(value)}
    if isinstance(value, Mapping):
        keep: dict[str, int] = {"count": int(value.get("count", -1))}
        if value.get("age") is not None:
            keep["age"] = int(value["age"])
        if value.get("limit") is not None:
            keep["limit"] = int(value["limit"])
        return keep
    return {"count": -1}


def backoff_delay(
    spec: Mapping[str, Any] | None,
    attempts_made: int,
    error: BaseException,
    job: Any,
    custom: BackoffStrategy | None = None,
) -> int:
    """The delay before the next attempt; -1 means "do not retry".

    `attempts_made` counts this failed attempt (BullMQ's n = atm + 1).
    """
    if spec is None:
        return 0
    kind = spec.get("type", "fixed")
    delay = float(spec.get("delay") or 0)
    if kind == "fixed":
        value = delay
    elif kind == "exponential":
        value = float(round(2 ** (attempts_made - 1) * delay))
    elif custom is not None:
        result = custom(attempts_made, kind, error, job)
        return -1 if result is None else int(result)
    else:
        raise InvalidJobOptions(
            f"unknown backoff type {kind!r}: give the worker a backoff_strategy"
        )
    jitter = spec.get("jitter")
    if jitter:
        value = random.uniform(value * (1 - float(jitter)), value)
    return int(value)
