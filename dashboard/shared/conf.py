"""The settings of both dashboard apps (the operator pages and the producer
API) as one typed, frozen object: `conf.get().page_size`, never the Django
setting itself.

Names, defaults and docs are gpu_workers/settings.py's table; this module
only gives each row of it that the apps read a type. The object is built from
`django.conf.settings`, a setting that is not there taking the table's
default, so a host project that sets nothing reads exactly what the
standalone site (dashboard/settings.py, which reads the environment through
the same table) reads. It is built once and again after Django's
`setting_changed` signal (override_settings, pytest-django's `settings`).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from gpu_workers.settings import BY_ATTR, Setting, named

#: A network the webhooks may reach although not public (the SSRF policy).
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

__all__ = ["DEFAULTS", "Conf", "get", "named", "read", "setting_name"]


@dataclass(frozen=True)
class Conf:
    """Every setting the two apps read (the table's rows that are not the
    standalone site's own), by its field (`Setting.attr`)."""

    # --- Redis and the queues shown ---
    redis_url: str
    prefixes: tuple[str, ...]
    queues: tuple[str, ...]
    discovery_ttl_s: float
    redis_connect_timeout_s: float
    redis_timeout_s: float
    # --- GPU workers (`manage.py runworkers`; the API's waiting reasons) ---
    hostname: str
    namespace: str
    gpus: str
    workers: str | list[dict[str, Any]]
    handler_modules: tuple[str, ...]
    #: Sizes: bytes, or text such as "1GiB".
    vram_reserve: str | int
    vram_cuda_context: str | int
    vram_margin: str | int
    max_restarts: int
    restart_window_s: float
    drain_timeout_s: float
    heartbeat_interval_s: float
    heartbeat_ttl_s: float
    metrics_data_points: int
    gpu_time_hours_kept: int
    gpu_time_days_kept: int
    gpu_time_max_keys: int
    model_pools: bool
    placement: bool
    placement_age_bound_s: float
    placement_cold_hold_s: float
    placement_scan: int
    process_per_gpu: bool
    # --- operator pages, live updates, /metrics ---
    read_only_queues: tuple[str, ...]
    page_size: int
    scan_cap: int
    sparkline_minutes: int
    series_sampling: bool
    data_preview_chars: int
    data_detail_chars: int
    redact: str
    list_value_max_bytes: int
    detail_value_max_bytes: int
    live_max_queues_per_socket: int
    live_max_queues_per_process: int
    metrics_token: str
    metrics_allow: tuple[str, ...]
    metrics_sample_jobs: int
    metrics_top_groups: int
    fleet_max_age_s: float
    metrics_top_gpus: int
    # --- logs, health checks, security ---
    log_format: str
    liveness_file: str
    login_max_failures: int
    login_lockout_s: int
    trusted_proxy_count: int
    csp: str
    # --- `make run`, `bullpen runserver` ("" access log: the site's default) ---
    access_log: str
    host: str
    port: int
    listen_backlog: int
    # --- producer API and webhooks ---
    prefix: str
    max_body_bytes: int
    rate_limit_per_min: int
    idempotency_ttl_s: int
    sse_max_s: float
    sse_keepalive_s: float
    ticket_max_age_s: int
    webhook_allow_private: bool
    webhook_allowed_networks: tuple[Network, ...]
    webhook_queue: str
    webhook_timeout_s: float
    webhook_attempts: int
    webhook_backoff_ms: int
    webhook_progress_interval_ms: int
    webhook_concurrency: int
    webhook_lock_duration_ms: int
    webhook_claim_idle_ms: int


def _networks(raw: Any) -> tuple[Network, ...]:
    """CIDR networks (ValueError for one that is not)."""
    return tuple(ipaddress.ip_network(n, strict=False) for n in raw or ())


def convert(row: Setting, value: Any) -> Any:
    """A setting's value as the conf holds it, by its default's type: lists
    as tuples, numbers as int or float; text (and the worker list, which may
    be JSON objects) as set. TypeError or ValueError when it cannot be."""
    if row.attr == "webhook_allowed_networks":
        return _networks(value)
    kind = type(row.default)
    if kind is tuple:
        return tuple(value or ())
    if kind in (bool, int, float):
        return kind(value)
    return value


def _resolved(attr: str, value: Any, found: dict[str, Any]) -> Any:
    """The defaults that are computed: this machine's host name, and the
    API's prefix the first of the key prefixes."""
    if attr == "hostname" and not value:
        return socket.gethostname()
    if attr == "prefix" and not value:
        return str((found.get("prefixes") or BY_ATTR["prefixes"].default)[0])
    return value


def read(attr: str) -> Any:
    """The field `attr` read from Django settings now (the table's default
    when not set); TypeError or ValueError when the setting cannot be
    converted (the system checks say which)."""
    row = BY_ATTR[attr]
    value = convert(row, getattr(settings, row.name, row.default))
    prefixes = getattr(settings, named("prefixes"), None) if attr == "prefix" else None
    return _resolved(attr, value, {"prefixes": prefixes})


def setting_name(attr: str) -> str:
    """The Django setting (and environment variable) behind the field `attr`."""
    return named(attr)


def build(values: dict[str, Any]) -> Conf:
    """A Conf from {setting name: value}, missing ones at their defaults."""
    found: dict[str, Any] = {}
    for f in fields(Conf):
        row = BY_ATTR[f.name]
        found[f.name] = convert(row, values.get(row.name, row.default))
    return Conf(**{k: _resolved(k, v, found) for k, v in found.items()})


#: Every setting at its default: what a host project that sets nothing reads.
DEFAULTS = build({})


@cache
def get() -> Conf:
    """The settings in force (built once, again after a setting changes)."""
    return build({row.name: getattr(settings, row.name) for row in _set_rows()})


def _set_rows() -> list[Setting]:
    """The rows whose setting Django's settings hold."""
    return [row for row in BY_ATTR.values() if hasattr(settings, row.name)]


def clear(**kwargs: Any) -> None:
    """Forget the built object (a `setting_changed` receiver)."""
    get.cache_clear()


setting_changed.connect(clear, dispatch_uid="dashboard.shared.conf.clear")
