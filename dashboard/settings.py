"""Django settings for Bullpen; the only module that reads the environment.

The dashboard's own settings (BULLPEN_*) take their defaults from
`dashboard.shared.conf.DEFAULTS`, and code reads them as `dashboard.shared.conf.get()`.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from dashboard.channel_layers import channel_layers
from dashboard.dburl import parse_database_url
from dashboard.shared.conf import DEFAULTS as _d

BASE_DIR = Path(__file__).resolve().parent.parent
#: Where Bullpen keeps its files (the SQLite database, the access log): the
#: checkout when run from it (`make run`), else (installed) the current directory.
DATA_DIR = Path(
    os.environ.get("BULLPEN_DATA_DIR")
    or (BASE_DIR if (BASE_DIR / "manage.py").is_file() else Path.cwd())
).resolve()

#: The standalone site's own templates/ and static/ (its layout, error pages
#: and styles): beside manage.py in a checkout, <prefix>/share/bullpen installed
#: (pyproject.toml data-files). The apps carry their own inside their packages.
SITE_FILES = (
    BASE_DIR
    if (BASE_DIR / "templates").is_dir()
    else Path(sys.prefix) / "share" / "bullpen"
)

#: Production is the default: DEBUG only when asked for (it shows settings on
#: every error page), and no start without a secret key (it signs sessions,
#: CSRF tokens and job tickets). `make run` generates one and keeps it beside
#: its database; tests set one.
DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    raise SystemExit(
        "DJANGO_SECRET_KEY is not set: set it to a long random value, e.g. "
        "DJANGO_SECRET_KEY=$(python -c 'import secrets; "
        "print(secrets.token_urlsafe(50))') (make run makes and keeps one itself)"
    )
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")

# --- HTTPS (on for a server behind TLS; off by default so that `make run`
# works over plain HTTP on localhost). `manage.py check --deploy` is clean
# with DJANGO_SECURE_COOKIES=1, DJANGO_SECURE_SSL_REDIRECT=1 and
# DJANGO_SECURE_HSTS_SECONDS>0 (+ _INCLUDE_SUBDOMAINS=1, _PRELOAD=1). ---
#: Session and CSRF cookies only over HTTPS.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = (
    os.environ.get("DJANGO_SECURE_COOKIES") == "1"
)
#: Plain-HTTP requests are redirected to HTTPS.
SECURE_SSL_REDIRECT = os.environ.get("DJANGO_SECURE_SSL_REDIRECT") == "1"
#: Load balancers probe, and Prometheus inside the cluster scrapes, over plain
#: HTTP: no redirect to https for these.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
#: Strict-Transport-Security max-age (0: no header).
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = (
    os.environ.get("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS") == "1"
)
SECURE_HSTS_PRELOAD = os.environ.get("DJANGO_SECURE_HSTS_PRELOAD") == "1"
#: Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and strips it
#: from clients): "1" trusts it to say the request was HTTPS.
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https")
    if os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER") == "1"
    else None
)
#: Origins trusted for CSRF (e.g. https://bullpen.example.com behind a proxy).
CSRF_TRUSTED_ORIGINS = [
    o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o
]
#: Content-Security-Policy of every response (see dashboard.shared.conf.CSP).
BULLPEN_CSP = os.environ.get("BULLPEN_CSP", _d.csp)
#: Failed logins per username and client address before logins are refused
#: for the lockout period (counted in Redis, so every process shares them).
BULLPEN_LOGIN_MAX_FAILURES = int(
    os.environ.get("BULLPEN_LOGIN_MAX_FAILURES", _d.login_max_failures)
)
BULLPEN_LOGIN_LOCKOUT_S = int(
    os.environ.get("BULLPEN_LOGIN_LOCKOUT_S", _d.login_lockout_s)
)
#: Every login (the dashboard's, Django admin's, any authenticate() call) goes
#: through the throttle: Django's ModelBackend with each attempt reserved in
#: Redis before its password is checked (dashboard/console/login_throttle.py).
AUTHENTICATION_BACKENDS = ["dashboard.console.login_throttle.ThrottledModelBackend"]
#: Proxies in front of the dashboard that each append the address they got
#: the request from to X-Forwarded-For: the client's address (login throttle,
#: /metrics networks) is that many entries from the header's right end. 0:
#: the header is ignored (anyone could write it), the connection's address counts.
BULLPEN_TRUSTED_PROXY_COUNT = int(
    os.environ.get("BULLPEN_TRUSTED_PROXY_COUNT", _d.trusted_proxy_count)
)

#: Redis holding the queues (BullMQ 6 layout) and Bullpen's own keys.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
#: Key prefixes whose queues the dashboard discovers.
BULLPEN_PREFIXES = [
    p for p in os.environ.get("BULLPEN_PREFIXES", ",".join(_d.prefixes)).split(",") if p
]
#: Seconds a page waits to connect to Redis, and for a reply, before it shows
#: "Redis is not answering" (503) instead of hanging.
BULLPEN_REDIS_CONNECT_TIMEOUT_S = float(
    os.environ.get("BULLPEN_REDIS_CONNECT_TIMEOUT_S", _d.redis_connect_timeout_s)
)
BULLPEN_REDIS_TIMEOUT_S = float(
    os.environ.get("BULLPEN_REDIS_TIMEOUT_S", _d.redis_timeout_s)
)
#: Queues shown even before they have any key in Redis.
BULLPEN_QUEUES = [q for q in os.environ.get("BULLPEN_QUEUES", "").split(",") if q]

# --- GPU workers (`manage.py runworkers` hands these to gpu_workers) ---
#: Bullpen's own Redis namespace for heartbeats, scale targets and cancel flags.
BULLPEN_NAMESPACE = os.environ.get("BULLPEN_NAMESPACE", _d.namespace)
#: This host's name in the worker registry (unique per supervisor).
BULLPEN_HOSTNAME = os.environ.get("BULLPEN_HOSTNAME") or socket.gethostname()
#: auto (NVML, else CPU-only) | nvml | none | sim:2x24GiB (simulated devices).
BULLPEN_GPUS = os.environ.get("BULLPEN_GPUS", _d.gpus)
#: Queues worked on this host: `queue:slots,...` or a JSON list of objects with
#: queue, prefix, slots, max_slots, workers, gpus, vram_share, lock_duration_ms...
BULLPEN_WORKERS = os.environ.get("BULLPEN_WORKERS", _d.workers)
#: Modules whose @handler functions worker processes import.
BULLPEN_HANDLER_MODULES = [
    m
    for m in os.environ.get(
        "BULLPEN_HANDLER_MODULES", ",".join(_d.handler_modules)
    ).split(",")
    if m
]
#: VRAM budget per GPU = total - reserve - one CUDA context per process - margin.
BULLPEN_VRAM_RESERVE = os.environ.get("BULLPEN_VRAM_RESERVE", _d.vram_reserve)
BULLPEN_VRAM_CUDA_CONTEXT = os.environ.get(
    "BULLPEN_VRAM_CUDA_CONTEXT", _d.vram_cuda_context
)
BULLPEN_VRAM_MARGIN = os.environ.get("BULLPEN_VRAM_MARGIN", _d.vram_margin)
#: A worker crashing more than this many times within the window is marked failed.
BULLPEN_MAX_RESTARTS = int(os.environ.get("BULLPEN_MAX_RESTARTS", _d.max_restarts))
BULLPEN_RESTART_WINDOW_S = float(
    os.environ.get("BULLPEN_RESTART_WINDOW_S", _d.restart_window_s)
)
#: How long SIGTERM lets running jobs finish before workers are killed.
BULLPEN_DRAIN_TIMEOUT_S = float(
    os.environ.get("BULLPEN_DRAIN_TIMEOUT_S", _d.drain_timeout_s)
)
#: Heartbeat period; records expire after the TTL when a host dies.
BULLPEN_HEARTBEAT_INTERVAL_S = float(
    os.environ.get("BULLPEN_HEARTBEAT_INTERVAL_S", _d.heartbeat_interval_s)
)
BULLPEN_HEARTBEAT_TTL_S = float(
    os.environ.get("BULLPEN_HEARTBEAT_TTL_S", _d.heartbeat_ttl_s)
)
#: Minutes of finished-job counts the GPU workers keep in BullMQ's `metrics:*`
#: keys (a week; 0 = none): /metrics completed/failed totals, Node getMetrics().
BULLPEN_METRICS_DATA_POINTS = int(
    os.environ.get("BULLPEN_METRICS_DATA_POINTS", _d.metrics_data_points)
)
#: GPU-time accounting: hours / days the hour / day buckets are kept, and the
#: queues, job names or tenants one bucket holds before folding into "(other)".
BULLPEN_GPU_TIME_HOURS_KEPT = int(
    os.environ.get("BULLPEN_GPU_TIME_HOURS_KEPT", _d.gpu_time_hours_kept)
)
BULLPEN_GPU_TIME_DAYS_KEPT = int(
    os.environ.get("BULLPEN_GPU_TIME_DAYS_KEPT", _d.gpu_time_days_kept)
)
BULLPEN_GPU_TIME_MAX_KEYS = int(
    os.environ.get("BULLPEN_GPU_TIME_MAX_KEYS", _d.gpu_time_max_keys)
)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "dashboard.console",
    "dashboard.api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "dashboard.staticfiles.StaticFilesMiddleware",
    "dashboard.console.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "dashboard.console.middleware.LoginThrottleMiddleware",
    "dashboard.console.middleware.RedisUnavailableMiddleware",
]

ROOT_URLCONF = "dashboard.site_urls"
ASGI_APPLICATION = "dashboard.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The site's own layout and error pages (templates/, next to
        # manage.py); each app keeps its own inside it.
        "DIRS": [SITE_FILES / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

#: The Django database (users, sessions, API tokens, audit log): DATABASE_URL
#: (postgres://user:pw@host:5432/name, sqlite:///path) when set, else SQLite at
#: BULLPEN_DB_PATH. A bad DATABASE_URL is reported by bullpen.E009 at start,
#: through a backend that refuses every query.
DATABASE_URL = os.environ.get("DATABASE_URL", "")
#: Seconds a PostgreSQL connection is reused (checked before reuse) by the
#: live sockets and commands; HTTP requests under daphne close theirs at
#: their end (dashboard/console/db.py).
BULLPEN_DB_CONN_MAX_AGE = int(os.environ.get("BULLPEN_DB_CONN_MAX_AGE", "60"))
BULLPEN_DATABASE_URL_ERROR = ""
try:
    _db = (
        parse_database_url(DATABASE_URL, DATA_DIR, BULLPEN_DB_CONN_MAX_AGE)
        if DATABASE_URL
        else {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("BULLPEN_DB_PATH", str(DATA_DIR / "db.sqlite3")),
        }
    )
except ValueError as _exc:
    BULLPEN_DATABASE_URL_ERROR = str(_exc)
    _db = {"ENGINE": "django.db.backends.dummy"}
DATABASES = {"default": _db}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [SITE_FILES / "static"]
#: Where `collectstatic` writes the static files hashed and compressed, which
#: WhiteNoise then serves with year-long caching. Installed: DATA_DIR/var/static;
#: in a checkout none (`make run` collects into var/static); until collected,
#: pages use the plain names (dashboard/staticfiles.py).
STATIC_ROOT = os.environ.get("BULLPEN_STATIC_ROOT") or (
    None if DATA_DIR == BASE_DIR else str(DATA_DIR / "var" / "static")
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "dashboard.staticfiles.StaticFilesStorage"},
}
#: WhiteNoise also serves the apps' own files at their plain names (so that a
#: checkout, the tests and a server not yet collected need no collect step).
WHITENOISE_USE_FINDERS = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
#: Log lines as text, or as one JSON object per line ("json"); the runworkers
#: and runwebhooks processes rewrite BULLPEN_LIVENESS_FILE while alive.
BULLPEN_LOG_FORMAT = os.environ.get("BULLPEN_LOG_FORMAT", _d.log_format)
BULLPEN_LIVENESS_FILE = os.environ.get("BULLPEN_LIVENESS_FILE", _d.liveness_file)
if BULLPEN_LOG_FORMAT == "json":
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "gpu_workers.logs.JsonFormatter"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json"}},
        "root": {"handlers": ["stderr"], "level": "INFO"},
        # Django's own loggers log through the root's handler only.
        "loggers": {"django": {"handlers": [], "propagate": True}},
    }
LOGIN_URL = "bullpen:login"
LOGIN_REDIRECT_URL = "bullpen:overview"
LOGOUT_REDIRECT_URL = "bullpen:login"
CSRF_FAILURE_VIEW = "dashboard.console.views.common.csrf_failure"

# --- Operator pages (dashboard/views) ---
#: Queues where every action is refused: `prefix:name`, `name` (any prefix) or `*`.
BULLPEN_READ_ONLY_QUEUES = [
    q for q in os.environ.get("BULLPEN_READ_ONLY_QUEUES", "").split(",") if q
]
#: Characters of job data a list row shows; the job page shows up to the detail cap
#: unless the operator asks for all of it.
BULLPEN_DATA_PREVIEW_CHARS = int(
    os.environ.get("BULLPEN_DATA_PREVIEW_CHARS", _d.data_preview_chars)
)
BULLPEN_DATA_DETAIL_CHARS = int(
    os.environ.get("BULLPEN_DATA_DETAIL_CHARS", _d.data_detail_chars)
)
#: Job fields (data, return value, stacktrace...) longer than this many bytes
#: are not read from Redis for job lists and search (64 KiB), and for the job
#: page (1 MiB) unless the operator asks for all: a job holding 50 MB of data
#: costs a list what its row shows.
BULLPEN_LIST_VALUE_MAX_BYTES = int(
    os.environ.get("BULLPEN_LIST_VALUE_MAX_BYTES", _d.list_value_max_bytes)
)
BULLPEN_DETAIL_VALUE_MAX_BYTES = int(
    os.environ.get("BULLPEN_DETAIL_VALUE_MAX_BYTES", _d.detail_value_max_bytes)
)
#: Dotted path of a function(data) -> data hiding sensitive values before display,
#: e.g. dashboard.shared.redaction.redact_sensitive_keys; empty: shown as stored.
BULLPEN_REDACT = os.environ.get("BULLPEN_REDACT", "")
#: Jobs per page of a queue's job list.
BULLPEN_PAGE_SIZE = int(os.environ.get("BULLPEN_PAGE_SIZE", _d.page_size))
#: Jobs one search or triage request reads at most before offering "continue".
BULLPEN_SCAN_CAP = int(os.environ.get("BULLPEN_SCAN_CAP", _d.scan_cap))
#: Seconds a discovery SCAN for new queues is reused (0: rescan on every page).
BULLPEN_DISCOVERY_TTL_S = float(
    os.environ.get("BULLPEN_DISCOVERY_TTL_S", _d.discovery_ttl_s)
)
#: Minutes of completed/failed throughput the overview's sparklines show.
BULLPEN_SPARKLINE_MINUTES = int(
    os.environ.get("BULLPEN_SPARKLINE_MINUTES", _d.sparkline_minutes)
)
#: "0": this dashboard process does not sample the charts' series (one point
#: per minute is kept whatever the number of samplers; see operations.md).
BULLPEN_SERIES_SAMPLING = os.environ.get("BULLPEN_SERIES_SAMPLING", "1") != "0"


# --- Live updates and /metrics (dashboard/live, dashboard/console/metrics.py) ---
#: The channel layer (same Redis, own keys) carries only the live sockets'
#: control messages between dashboard processes (dashboard/console/live/access.py:
#: session ended, access changed); events go from each process's reader to
#: its own sockets in memory.
CHANNEL_LAYERS = channel_layers(
    REDIS_URL,
    f"{BULLPEN_NAMESPACE}:asgi",
    BULLPEN_REDIS_CONNECT_TIMEOUT_S,
    BULLPEN_REDIS_TIMEOUT_S,
)
# Live sockets: queues one socket may follow (its queues and those of its
# jobs), and queues one process's events reader follows for all its sockets;
# a subscribe past either is refused with a message saying which.
BULLPEN_LIVE_MAX_QUEUES_PER_SOCKET = int(
    os.environ.get("BULLPEN_LIVE_MAX_QUEUES_PER_SOCKET", _d.live_max_queues_per_socket)
)
BULLPEN_LIVE_MAX_QUEUES_PER_PROCESS = int(
    os.environ.get(
        "BULLPEN_LIVE_MAX_QUEUES_PER_PROCESS", _d.live_max_queues_per_process
    )
)
#: Bearer token accepted by /metrics (empty: none is).
BULLPEN_METRICS_TOKEN = os.environ.get("BULLPEN_METRICS_TOKEN", _d.metrics_token)
#: Networks (CIDR) that may read /metrics without a token.
BULLPEN_METRICS_ALLOW = [
    n.strip()
    for n in os.environ.get("BULLPEN_METRICS_ALLOW", ",".join(_d.metrics_allow)).split(
        ","
    )
    if n.strip()
]
#: Most recent finished jobs per queue (completed and failed each) whose wait
#: and run times feed the /metrics duration histograms.
BULLPEN_METRICS_SAMPLE_JOBS = int(
    os.environ.get("BULLPEN_METRICS_SAMPLE_JOBS", _d.metrics_sample_jobs)
)

# --- `make run` (dashboard/run.py) ---
#: The address the dashboard listens on.
BULLPEN_HOST = os.environ.get("BULLPEN_HOST", _d.host)
BULLPEN_PORT = int(os.environ.get("BULLPEN_PORT", _d.port))
#: Connections waiting to be accepted (a reconnect storm after a restart).
BULLPEN_LISTEN_BACKLOG = int(
    os.environ.get("BULLPEN_LISTEN_BACKLOG", _d.listen_backlog)
)
#: Where daphne writes one line per request: a file, so that the terminal
#: keeps the banner (URL, admin password) readable; "-" for the terminal.
BULLPEN_ACCESS_LOG = os.environ.get(
    "BULLPEN_ACCESS_LOG", str(DATA_DIR / "var" / "access.log")
)

# --- Producer API and webhooks (dashboard/api; defaults in its defaults.py) ---
from dashboard.api import defaults as _api  # noqa: E402

#: Key prefix of the queues served under /api/v1/.
BULLPEN_API_PREFIX = os.environ.get(
    "BULLPEN_API_PREFIX", (BULLPEN_PREFIXES or ["bull"])[0]
)
#: Largest request body the API reads, and the default requests/minute per token.
BULLPEN_API_MAX_BODY_BYTES = int(
    os.environ.get("BULLPEN_API_MAX_BODY_BYTES", _api.MAX_BODY_BYTES)
)
BULLPEN_API_RATE_LIMIT_PER_MIN = int(
    os.environ.get("BULLPEN_API_RATE_LIMIT_PER_MIN", _api.RATE_LIMIT_PER_MIN)
)
#: Longest Server-Sent Events connection (clients resume with Last-Event-ID).
BULLPEN_API_SSE_MAX_S = float(os.environ.get("BULLPEN_API_SSE_MAX_S", _api.SSE_MAX_S))
#: Webhooks to private, loopback and link-local addresses: refused unless "1"
#: (local development) or inside one of the allowed networks (CIDR, comma separated).
BULLPEN_WEBHOOK_ALLOW_PRIVATE = os.environ.get("BULLPEN_WEBHOOK_ALLOW_PRIVATE") == "1"
BULLPEN_WEBHOOK_ALLOWED_NETWORKS = [
    n.strip()
    for n in os.environ.get("BULLPEN_WEBHOOK_ALLOWED_NETWORKS", "").split(",")
    if n.strip()
]
#: One delivery's timeout; attempts and the first exponential backoff delay.
BULLPEN_WEBHOOK_TIMEOUT_S = float(
    os.environ.get("BULLPEN_WEBHOOK_TIMEOUT_S", _api.WEBHOOK_TIMEOUT_S)
)
BULLPEN_WEBHOOK_ATTEMPTS = int(
    os.environ.get("BULLPEN_WEBHOOK_ATTEMPTS", _api.WEBHOOK_ATTEMPTS)
)
BULLPEN_WEBHOOK_BACKOFF_MS = int(
    os.environ.get("BULLPEN_WEBHOOK_BACKOFF_MS", _api.WEBHOOK_BACKOFF_MS)
)
#: At most one progress webhook per job and destination per this many ms.
BULLPEN_WEBHOOK_PROGRESS_INTERVAL_MS = int(
    os.environ.get(
        "BULLPEN_WEBHOOK_PROGRESS_INTERVAL_MS", _api.WEBHOOK_PROGRESS_INTERVAL_MS
    )
)
#: Deliveries at once per dispatcher, and the lock after which a delivery of a
#: killed dispatcher is retried.
BULLPEN_WEBHOOK_CONCURRENCY = int(
    os.environ.get("BULLPEN_WEBHOOK_CONCURRENCY", _api.WEBHOOK_CONCURRENCY)
)
BULLPEN_WEBHOOK_LOCK_DURATION_MS = int(
    os.environ.get("BULLPEN_WEBHOOK_LOCK_DURATION_MS", _api.WEBHOOK_LOCK_DURATION_MS)
)
#: Idle time after which a dead dispatcher's unacknowledged events are claimed.
BULLPEN_WEBHOOK_CLAIM_IDLE_MS = int(
    os.environ.get("BULLPEN_WEBHOOK_CLAIM_IDLE_MS", _api.WEBHOOK_CLAIM_IDLE_MS)
)
