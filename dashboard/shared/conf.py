"""The dashboard app's settings as one typed, frozen object, defaults here.

`dashboard/settings.py` reads the environment (taking its defaults from
`DashboardConf()`); code reads `conf.get().page_size`, never
`settings.BULLPEN_PAGE_SIZE`. The object is built from `django.conf.settings`
(a setting that is not there keeps its default here), cached, and rebuilt
after Django's `setting_changed` signal (override_settings, pytest-django's
`settings` fixture).

The producer API's settings are `dashboard.api.conf`; the Redis client's
(REDIS_URL, timeouts) and BULLPEN_REDACT are read by `dashboard.shared.redis` and
`dashboard.shared.redaction`, the leaves the API shares, from Django's settings.
"""

from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from gpu_workers import defaults as gpu
from queues.defaults import PREFIX

#: The Content-Security-Policy of every response: scripts and styles only from
#: our static files (htmx runs with allowEval off; bar widths are set by
#: static/dashboard/bars.js, not style attributes).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)


@dataclass(frozen=True)
class DashboardConf:
    """Every BULLPEN_* setting the dashboard app reads (field `x` is
    BULLPEN_X), with its default."""

    # --- Redis and the queues shown ---
    prefixes: tuple[str, ...] = (PREFIX,)
    queues: tuple[str, ...] = ()
    namespace: str = gpu.NAMESPACE
    redis_connect_timeout_s: float = 3.0
    redis_timeout_s: float = 30.0
    discovery_ttl_s: float = 30.0
    # --- operator pages ---
    read_only_queues: tuple[str, ...] = ()
    data_preview_chars: int = 200
    data_detail_chars: int = 20_000
    list_value_max_bytes: int = 64 * 1024
    detail_value_max_bytes: int = 1024 * 1024
    page_size: int = 25
    scan_cap: int = 1_000
    sparkline_minutes: int = 30
    #: Whether this process samples the charts' series (gpu_workers/series).
    series_sampling: bool = True
    csp: str = CSP
    login_max_failures: int = 5
    login_lockout_s: int = 900
    #: Proxies in front that append to X-Forwarded-For (dashboard/shared/addresses.py);
    #: 0: the header is not read, the client is the connection's address.
    trusted_proxy_count: int = 0
    # --- /metrics ---
    metrics_token: str = ""
    metrics_allow: tuple[str, ...] = ("127.0.0.1/32", "::1/128")
    metrics_sample_jobs: int = 100
    # --- live updates ---
    #: Queues (its own and those of its jobs) one live socket may follow,
    #: and queues one process's events reader follows.
    live_max_queues_per_socket: int = 500
    live_max_queues_per_process: int = 2_000
    # --- GPU workers (`manage.py runworkers`) ---
    hostname: str = ""
    gpus: str = "auto"
    workers: str = "gpu:3"
    handler_modules: tuple[str, ...] = (
        "gpu_workers.demo_handlers",
        "gpu_workers.torch_handlers",
    )
    #: Sizes: bytes, or text such as "1GiB".
    vram_reserve: str | int = "1GiB"
    vram_cuda_context: str | int = "512MiB"
    vram_margin: str | int = "1GiB"
    max_restarts: int = gpu.MAX_RESTARTS
    restart_window_s: float = gpu.RESTART_WINDOW_S
    drain_timeout_s: float = gpu.DRAIN_TIMEOUT_S
    heartbeat_interval_s: float = gpu.HEARTBEAT_INTERVAL_S
    heartbeat_ttl_s: float = gpu.HEARTBEAT_TTL_S
    metrics_data_points: int = gpu.METRICS_DATA_POINTS
    #: GPU-time accounting (gpu_workers/gputime.py): buckets kept, key cap.
    gpu_time_hours_kept: int = gpu.GPU_TIME_HOURS_KEPT
    gpu_time_days_kept: int = gpu.GPU_TIME_DAYS_KEPT
    gpu_time_max_keys: int = gpu.GPU_TIME_MAX_KEYS
    # --- `make run` (dashboard/run.py) ---
    host: str = "127.0.0.1"
    port: int = 8000
    #: Connections the kernel queues for daphne before it accepts them
    #: (twisted's own default, 50, refuses a reconnect storm of a few
    #: hundred browsers; the kernel caps it at net.core.somaxconn).
    listen_backlog: int = 1024
    #: Where daphne writes request lines ("-": the terminal; "": var/access.log).
    access_log: str = ""
    # --- logs and liveness (docs/operations.md "Health checks") ---
    #: "text", or "json": one JSON object per line.
    log_format: str = "text"
    #: The file runworkers / runwebhooks rewrite while alive ("": none).
    liveness_file: str = ""


DEFAULTS = DashboardConf()


def _typed(default: Any, value: Any) -> Any:
    """`value` as the field holds it: lists (as settings hold them) as
    tuples, whole numbers of a float field as floats; the rest as set."""
    if isinstance(default, tuple):
        return tuple(value)
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    return value


def build() -> DashboardConf:
    """A DashboardConf from django.conf.settings (missing settings: defaults)."""
    found = {}
    for field in dataclasses.fields(DashboardConf):
        default = getattr(DEFAULTS, field.name)
        value = getattr(settings, f"BULLPEN_{field.name.upper()}", default)
        found[field.name] = _typed(default, value)
    if not found["hostname"]:
        found["hostname"] = socket.gethostname()
    return DashboardConf(**found)


@cache
def get() -> DashboardConf:
    """The dashboard's settings (built once, rebuilt after a setting changes)."""
    return build()


def clear(**kwargs: Any) -> None:
    """Forget the built object (a `setting_changed` receiver)."""
    get.cache_clear()


setting_changed.connect(clear, dispatch_uid="dashboard.shared.conf.clear")
