"""The API's settings as one typed, frozen object: `conf.get().prefix`.

`dashboard/settings.py` is the only module reading the environment; `get()`
builds an `ApiConf` from `django.conf.settings` once and builds it again after
any setting changes (Django's `setting_changed`, which `override_settings`
and pytest-django's `settings` fixture send), so a test that changes a setting
sees the change at once. A setting that is absent takes its field's default,
whose value lives in `defaults`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from gpu_workers.defaults import NAMESPACE
from queues.defaults import PREFIX

from . import defaults
from .webhooks.ssrf import Network


def _networks(raw: Any) -> tuple[Network, ...]:
    """CIDR networks (ValueError for one that is not)."""
    return tuple(ipaddress.ip_network(n, strict=False) for n in raw or [])


def _from(setting: str, convert: Callable[[Any], Any], default: Any = MISSING) -> Any:
    """A field read from the Django setting `setting` through `convert`."""
    return field(default=default, metadata={"setting": setting, "convert": convert})


@dataclass(frozen=True)
class ApiConf:
    """Every setting of the producer API and the webhooks, converted."""

    #: The Redis holding the queues and Bullpen's keys.
    redis_url: str = _from("REDIS_URL", str)
    #: Bullpen's own Redis namespace (never a queue prefix).
    namespace: str = _from("BULLPEN_NAMESPACE", str, NAMESPACE)
    #: The key prefix of the queues the API serves (absent: the first of
    #: BULLPEN_PREFIXES).
    prefix: str = _from("BULLPEN_API_PREFIX", str, PREFIX)
    #: Largest request body read.
    max_body_bytes: int = _from(
        "BULLPEN_API_MAX_BODY_BYTES", int, defaults.MAX_BODY_BYTES
    )
    #: Default per-token request rate.
    rate_limit_per_min: int = _from(
        "BULLPEN_API_RATE_LIMIT_PER_MIN", int, defaults.RATE_LIMIT_PER_MIN
    )
    #: How long an Idempotency-Key maps to its job.
    idempotency_ttl_s: int = _from(
        "BULLPEN_API_IDEMPOTENCY_TTL_S", int, defaults.IDEMPOTENCY_TTL_S
    )
    #: Longest SSE connection.
    sse_max_s: float = _from("BULLPEN_API_SSE_MAX_S", float, defaults.SSE_MAX_S)
    #: Period of SSE keep-alive comments.
    sse_keepalive_s: float = _from(
        "BULLPEN_API_SSE_KEEPALIVE_S", float, defaults.SSE_KEEPALIVE_S
    )
    #: Lifetime of job read tickets.
    ticket_max_age_s: int = _from(
        "BULLPEN_API_TICKET_MAX_AGE_S", int, defaults.TICKET_MAX_AGE_S
    )
    #: Whether webhooks may go to private, loopback and link-local addresses.
    webhook_allow_private: bool = _from("BULLPEN_WEBHOOK_ALLOW_PRIVATE", bool, False)
    #: Networks allowed even though they are not public (e.g. 10.1.2.0/24).
    webhook_allowed_networks: tuple[Network, ...] = _from(
        "BULLPEN_WEBHOOK_ALLOWED_NETWORKS", _networks, ()
    )
    #: The queue whose jobs are webhook deliveries.
    webhook_queue: str = _from("BULLPEN_WEBHOOK_QUEUE", str, defaults.WEBHOOK_QUEUE)
    #: Timeout of one delivery (connect, each read).
    webhook_timeout_s: float = _from(
        "BULLPEN_WEBHOOK_TIMEOUT_S", float, defaults.WEBHOOK_TIMEOUT_S
    )
    #: Attempts per delivery.
    webhook_attempts: int = _from(
        "BULLPEN_WEBHOOK_ATTEMPTS", int, defaults.WEBHOOK_ATTEMPTS
    )
    #: First exponential backoff delay of a delivery.
    webhook_backoff_ms: int = _from(
        "BULLPEN_WEBHOOK_BACKOFF_MS", int, defaults.WEBHOOK_BACKOFF_MS
    )
    #: Least event time between two progress webhooks of a job and destination.
    webhook_progress_interval_ms: int = _from(
        "BULLPEN_WEBHOOK_PROGRESS_INTERVAL_MS",
        int,
        defaults.WEBHOOK_PROGRESS_INTERVAL_MS,
    )
    #: Deliveries running at once per dispatcher.
    webhook_concurrency: int = _from(
        "BULLPEN_WEBHOOK_CONCURRENCY", int, defaults.WEBHOOK_CONCURRENCY
    )
    #: Lock of a running delivery (and the stalled-check period).
    webhook_lock_duration_ms: int = _from(
        "BULLPEN_WEBHOOK_LOCK_DURATION_MS", int, defaults.WEBHOOK_LOCK_DURATION_MS
    )
    #: Idle time after which a dead dispatcher's unacknowledged entries are
    #: claimed.
    webhook_claim_idle_ms: int = _from(
        "BULLPEN_WEBHOOK_CLAIM_IDLE_MS", int, defaults.WEBHOOK_CLAIM_IDLE_MS
    )
    #: Modules whose @handler functions declare a job's VRAM (for a waiting
    #: job's `waiting_reason`, before any GPU worker recorded its need).
    handler_modules: tuple[str, ...] = _from("BULLPEN_HANDLER_MODULES", tuple, ())
    #: This host's name (the dispatcher's consumer name).
    hostname: str = _from("BULLPEN_HOSTNAME", str, defaults.HOSTNAME)

    @classmethod
    def from_settings(cls) -> ApiConf:
        """Every field read from Django settings now (see `read`)."""
        return cls(**{f.name: read(f.name) for f in fields(cls)})


_FIELDS: dict[str, Field[Any]] = {f.name: f for f in fields(ApiConf)}


def setting_name(name: str) -> str:
    """The Django setting behind the field `name`."""
    return str(_FIELDS[name].metadata["setting"])


def read(name: str) -> Any:
    """The field `name` read from Django settings now; TypeError or ValueError
    when the setting cannot be converted (the system checks report which)."""
    f = _FIELDS[name]
    setting = setting_name(name)
    if f.default is MISSING or hasattr(settings, setting):
        return f.metadata["convert"](getattr(settings, setting))
    if name == "prefix":
        return str((getattr(settings, "BULLPEN_PREFIXES", None) or [f.default])[0])
    return f.default


@cache
def get() -> ApiConf:
    """The settings in force (built once, again after a setting changes)."""
    return ApiConf.from_settings()


@receiver(setting_changed)
def _setting_changed(**kwargs: Any) -> None:
    get.cache_clear()
