"""The one table of Bullpen's settings: each row names a setting (the
environment variable and the Django setting are the same name), how its text
parses, its default and one line of doc.

Everything else derives from it: `gpu_workers/envconfig.py` (the environment
of `python -m gpu_workers`), `gpu_workers/defaults.py` (the GPU layer's
defaults), `dashboard/settings.py` (the standalone site reads the environment
through `environ_values`), `dashboard/shared/conf.py` (both dashboard apps read
Django settings, a missing one taking the default here, so a host project that
sets nothing gets the standalone site's defaults) and docs/configuration.md
(checked against this table by tests/test_configuration_doc.py).

It lives in gpu_workers, the lowest layer reading settings (no Django).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from queues.defaults import PREFIX


def names(value: str) -> tuple[str, ...]:
    """A comma-separated list, blanks around and empty entries dropped."""
    return tuple(n.strip() for n in value.split(",") if n.strip())


def flag(value: str) -> bool:
    """On only when "1" (off by default)."""
    return value == "1"


def unless_zero(value: str) -> bool:
    """On unless "0" (on by default)."""
    return value != "0"


_ON, _OFF = ("on", "1", "true", "yes"), ("off", "0", "false", "no")


def on_off(value: str) -> bool:
    """`on` or `off` (also 1/0, true/false, yes/no; any case); anything else
    is a ValueError, so a typo is refused rather than read as either."""
    text = value.strip().lower()
    if text in _ON or text in _OFF:
        return text in _ON
    raise ValueError(f"expected on or off, not {value!r}")


@dataclass(frozen=True)
class Setting:
    """One row: the name (environment variable = Django setting), its
    default (the value, as code sees it), how the variable's text parses, one
    line of doc, and who reads it."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    doc: str
    #: "site": the standalone site's Django settings only (dashboard/settings.py);
    #: "dashboard": the typed conf both apps read (dashboard/shared/conf.py);
    #: "gpu": that conf, and `python -m gpu_workers` reads the variable too.
    part: str = "dashboard"
    #: The default as docs/configuration.md writes it, where it is not the value.
    shown: str = ""
    #: The SupervisorConfig field it fills (gpu rows), where not `attr`.
    supervisor: str = ""

    @property
    def attr(self) -> str:
        """Its field in the typed conf (dashboard/shared/conf.py): the name in
        lower case less BULLPEN_ (and less API_: the API's settings)."""
        return self.name.removeprefix("BULLPEN_").removeprefix("API_").lower()

    @property
    def shown_default(self) -> str:
        """The default as the docs' table writes it."""
        if self.shown:
            return self.shown
        value = self.default
        if isinstance(value, bool):
            return "on" if value else "off"
        if value in ("", ()):
            return "empty"
        if isinstance(value, tuple):
            value = ",".join(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return f"`{value}`"


_SITE, _GPU = "site", "gpu"


def _S(
    name: str, default: Any, parse: Callable[[str], Any], doc: str, **kw: str
) -> Setting:
    """A row both dashboard apps read."""
    return Setting(name, default, parse, doc, **kw)


def _G(
    name: str, default: Any, parse: Callable[[str], Any], doc: str, **kw: str
) -> Setting:
    """A row both dashboard apps and `python -m gpu_workers` read."""
    return Setting(name, default, parse, doc, _GPU, **kw)


def _W(
    name: str, default: Any, parse: Callable[[str], Any], doc: str, **kw: str
) -> Setting:
    """A row of the standalone site's Django settings only."""
    return Setting(name, default, parse, doc, _SITE, **kw)


#: The CSP of every response: scripts and styles only from our static files
#: (htmx runs with allowEval off; bar widths are set by static/dashboard/bars.js).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)

DEMO_HANDLERS, TORCH_HANDLERS = (
    "gpu_workers.demo_handlers",
    "gpu_workers.torch_handlers",
)
LOOPBACK = ("127.0.0.1/32", "::1/128")
# How docs/configuration.md writes the defaults that are not a plain value.
REQUIRED = (
    "**required** (`make run` makes one and keeps it in `secret_key` beside the "
    "database, mode 0600)"
)
CSP_SHOWN = "scripts and styles from `/static/` only, no eval"
DATABASE_SHOWN = "unset (SQLite at `BULLPEN_DB_PATH`)"
DB_PATH_SHOWN = "`db.sqlite3` in the data directory"
DATA_DIR_SHOWN = (
    "the checkout when run from it (`make run`, `manage.py`); installed "
    "(`pip install bullpen[dashboard]`), the current directory"
)
STATIC_SHOWN = (
    "installed: `var/static` in the data directory; in a checkout none "
    "(`make run` uses `var/static`)"
)
ACCESS_LOG_SHOWN = "`var/access.log` in the data directory"

ROWS: tuple[Setting, ...] = (
    # --- Redis and queue discovery ---
    _G("REDIS_URL", "redis://127.0.0.1:6379/0", str, "the Redis of the queues"),
    _S("BULLPEN_PREFIXES", (PREFIX,), names, "key prefixes whose queues are found"),
    _S("BULLPEN_QUEUES", (), names, "queues shown even before they exist"),
    _S("BULLPEN_DISCOVERY_TTL_S", 30.0, float, "longest a queue SCAN is reused"),
    _S("BULLPEN_REDIS_CONNECT_TIMEOUT_S", 3.0, float, "a page's connect timeout"),
    _S("BULLPEN_REDIS_TIMEOUT_S", 30.0, float, "a page's Redis reply timeout"),
    # --- GPU workers and supervisors ---
    _G(
        "BULLPEN_HOSTNAME",
        "",
        str,
        "this host's name",
        supervisor="host",
        shown="the machine's host name",
    ),
    _G("BULLPEN_NAMESPACE", "bullpen", str, "prefix of Bullpen's own keys"),
    _G("BULLPEN_GPUS", "auto", str, "auto | nvml | none | sim:2x24GiB"),
    _G("BULLPEN_WORKERS", "gpu:3", str, "queue:slots,... or JSON", supervisor="queues"),
    _G(
        "BULLPEN_HANDLER_MODULES",
        (DEMO_HANDLERS, TORCH_HANDLERS),
        names,
        "modules with @handler functions",
    ),
    _G(
        "BULLPEN_VRAM_RESERVE",
        "1GiB",
        str,
        "driver reserve per GPU",
        supervisor="reserve_bytes",
    ),
    _G(
        "BULLPEN_VRAM_CUDA_CONTEXT",
        "512MiB",
        str,
        "one CUDA context",
        supervisor="context_bytes",
    ),
    _G(
        "BULLPEN_VRAM_MARGIN",
        "1GiB",
        str,
        "safety margin per GPU",
        supervisor="margin_bytes",
    ),
    _G("BULLPEN_MAX_RESTARTS", 5, int, "crashes in the window before failed"),
    _G("BULLPEN_RESTART_WINDOW_S", 60.0, float, "the restart window"),
    _G("BULLPEN_DRAIN_TIMEOUT_S", 60.0, float, "how long SIGTERM lets jobs run"),
    _G("BULLPEN_HEARTBEAT_INTERVAL_S", 2.0, float, "heartbeat period"),
    _G("BULLPEN_HEARTBEAT_TTL_S", 6.0, float, "a silent worker is gone after it"),
    _G("BULLPEN_METRICS_DATA_POINTS", 7 * 24 * 60, int, "minutes of job counts"),
    _G("BULLPEN_GPU_TIME_HOURS_KEPT", 8 * 24, int, "hours an hour bucket is kept"),
    _G("BULLPEN_GPU_TIME_DAYS_KEPT", 400, int, "days a day bucket is kept"),
    _G("BULLPEN_GPU_TIME_MAX_KEYS", 100, int, "keys a bucket holds before (other)"),
    _G("BULLPEN_MODEL_POOLS", True, on_off, "supervisors plan warm pools"),
    _G("BULLPEN_PLACEMENT", True, on_off, "prefer jobs whose model is resident"),
    _G("BULLPEN_PLACEMENT_AGE_BOUND_S", 60.0, float, "longest a job is passed over"),
    _G("BULLPEN_PLACEMENT_COLD_HOLD_S", 2.0, float, "a cold job waits for a warm GPU"),
    _G("BULLPEN_PLACEMENT_SCAN", 16, int, "waiting jobs placement looks at"),
    _G("BULLPEN_PROCESS_PER_GPU", True, on_off, "one worker process per GPU"),
    # --- operator pages ---
    _S("BULLPEN_READ_ONLY_QUEUES", (), names, "queues (or *) where no action runs"),
    _S("BULLPEN_PAGE_SIZE", 25, int, "jobs per page of a job list"),
    _S("BULLPEN_SCAN_CAP", 1_000, int, "jobs one search or triage reads"),
    _S("BULLPEN_SPARKLINE_MINUTES", 30, int, "minutes the sparklines draw"),
    _S("BULLPEN_SERIES_SAMPLING", True, unless_zero, "this process samples charts"),
    _S("BULLPEN_DATA_PREVIEW_CHARS", 200, int, "data characters of a list row"),
    _S("BULLPEN_DATA_DETAIL_CHARS", 20_000, int, "data characters of a job page"),
    _S("BULLPEN_REDACT", "", str, "dotted path of the redaction function"),
    _S("BULLPEN_LIST_VALUE_MAX_BYTES", 64 * 1024, int, "longest field lists read"),
    _S("BULLPEN_DETAIL_VALUE_MAX_BYTES", 1 << 20, int, "longest field a job reads"),
    # --- live updates ---
    _S("BULLPEN_LIVE_MAX_QUEUES_PER_SOCKET", 500, int, "queues a socket follows"),
    _S("BULLPEN_LIVE_MAX_QUEUES_PER_PROCESS", 2_000, int, "queues a process follows"),
    # --- /metrics ---
    _S("BULLPEN_METRICS_TOKEN", "", str, "bearer token /metrics accepts"),
    _S("BULLPEN_METRICS_ALLOW", LOOPBACK, names, "networks read /metrics freely"),
    _S("BULLPEN_METRICS_SAMPLE_JOBS", 100, int, "jobs per queue for histograms"),
    _S("BULLPEN_METRICS_TOP_GROUPS", 20, int, "groups per queue with a label"),
    _S("BULLPEN_FLEET_MAX_AGE_S", 2.0, float, "oldest fleet snapshot pages show"),
    _S("BULLPEN_METRICS_TOP_GPUS", 256, int, "GPUs /metrics labels one by one"),
    # --- logs and health checks ---
    _G("BULLPEN_LOG_FORMAT", "text", str, "text, or json: one object per line"),
    _G("BULLPEN_LIVENESS_FILE", "", str, "rewritten while alive", shown="empty (none)"),
    # --- security and Django ---
    _W("DJANGO_SECRET_KEY", "", str, "signs sessions and tickets", shown=REQUIRED),
    _W("DJANGO_DEBUG", False, flag, "Django's debug pages"),
    _W("DJANGO_ALLOWED_HOSTS", ("127.0.0.1", "localhost"), names, "host names"),
    _W("DJANGO_SECURE_COOKIES", False, flag, "cookies only over HTTPS"),
    _W("DJANGO_SECURE_SSL_REDIRECT", False, flag, "HTTP redirected to HTTPS"),
    _W("DJANGO_SECURE_HSTS_SECONDS", 0, int, "Strict-Transport-Security max-age"),
    _W("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False, flag, "HSTS subdomains"),
    _W("DJANGO_SECURE_HSTS_PRELOAD", False, flag, "HSTS preload"),
    _W("DJANGO_SECURE_PROXY_SSL_HEADER", False, flag, "trust X-Forwarded-Proto"),
    _W("DJANGO_CSRF_TRUSTED_ORIGINS", (), names, "origins trusted for CSRF"),
    _S("BULLPEN_LOGIN_MAX_FAILURES", 5, int, "failed logins before a lockout"),
    _S("BULLPEN_LOGIN_LOCKOUT_S", 900, int, "how long a lockout lasts"),
    _S("BULLPEN_TRUSTED_PROXY_COUNT", 0, int, "proxies adding X-Forwarded-For"),
    _S("BULLPEN_CSP", CSP, str, "the Content-Security-Policy", shown=CSP_SHOWN),
    _W("DATABASE_URL", "", str, "the Django database", shown=DATABASE_SHOWN),
    _W("BULLPEN_DB_CONN_MAX_AGE", 60, int, "seconds a connection is reused"),
    _W("BULLPEN_DB_PATH", "", str, "the SQLite file", shown=DB_PATH_SHOWN),
    _W("BULLPEN_DATA_DIR", "", str, "Bullpen's files", shown=DATA_DIR_SHOWN),
    _W("BULLPEN_STATIC_ROOT", "", str, "collected files", shown=STATIC_SHOWN),
    # --- `make run` and `bullpen runserver` ---
    _S("BULLPEN_ACCESS_LOG", "", str, "request lines", shown=ACCESS_LOG_SHOWN),
    _S("BULLPEN_HOST", "127.0.0.1", str, "the address the dashboard listens on"),
    _S("BULLPEN_PORT", 8000, int, "the port the dashboard listens on"),
    _S("BULLPEN_LISTEN_BACKLOG", 1024, int, "connections waiting to be accepted"),
    # --- producer API and webhooks ---
    _S(
        "BULLPEN_API_PREFIX",
        "",
        str,
        "key prefix of the API's queues",
        shown="the first of `BULLPEN_PREFIXES`",
    ),
    _S("BULLPEN_API_MAX_BODY_BYTES", 1 << 20, int, "largest request body"),
    _S("BULLPEN_API_RATE_LIMIT_PER_MIN", 600, int, "requests/minute per token"),
    _S("BULLPEN_API_IDEMPOTENCY_TTL_S", 24 * 3600, int, "life of an Idempotency-Key"),
    _S("BULLPEN_API_SSE_MAX_S", 300.0, float, "longest SSE connection"),
    _S("BULLPEN_API_SSE_KEEPALIVE_S", 15.0, float, "SSE keep-alive period"),
    _S("BULLPEN_API_TICKET_MAX_AGE_S", 7 * 24 * 3600, int, "life of a job ticket"),
    _S("BULLPEN_WEBHOOK_ALLOW_PRIVATE", False, flag, "webhooks to private hosts"),
    _S("BULLPEN_WEBHOOK_ALLOWED_NETWORKS", (), names, "CIDR networks allowed too"),
    _S("BULLPEN_WEBHOOK_QUEUE", "bullpen-webhooks", str, "the deliveries' queue"),
    _S("BULLPEN_WEBHOOK_TIMEOUT_S", 10.0, float, "one delivery's timeout"),
    _S("BULLPEN_WEBHOOK_ATTEMPTS", 8, int, "attempts per delivery"),
    _S("BULLPEN_WEBHOOK_BACKOFF_MS", 2000, int, "first backoff of a delivery"),
    _S("BULLPEN_WEBHOOK_PROGRESS_INTERVAL_MS", 1000, int, "progress webhook throttle"),
    _S("BULLPEN_WEBHOOK_CONCURRENCY", 8, int, "deliveries at once per dispatcher"),
    _S("BULLPEN_WEBHOOK_LOCK_DURATION_MS", 30_000, int, "lock of a delivery"),
    _S("BULLPEN_WEBHOOK_CLAIM_IDLE_MS", 60_000, int, "idle before entries are claimed"),
)

#: Rows by name (the environment variable, the Django setting).
BY_NAME: dict[str, Setting] = {row.name: row for row in ROWS}
#: Rows both dashboard apps read, by the typed conf's field.
BY_ATTR: dict[str, Setting] = {row.attr: row for row in ROWS if row.part != _SITE}
_EVERY_ATTR: dict[str, Setting] = {row.attr: row for row in ROWS}


def named(attr: str) -> str:
    """The name (environment variable, Django setting) of the row whose field
    is `attr`: code and messages name settings through the table."""
    return _EVERY_ATTR[attr].name


def default(attr: str) -> Any:
    """The default of the conf field `attr`."""
    return BY_ATTR[attr].default


def environ_values(environ: Mapping[str, str]) -> dict[str, Any]:
    """{name: value} of every row: its variable parsed when set (an empty
    text counts: `BULLPEN_CSP=` sends no header), else its default. A text
    that does not parse raises ValueError."""
    return {
        row.name: row.parse(environ[row.name]) if row.name in environ else row.default
        for row in ROWS
    }
