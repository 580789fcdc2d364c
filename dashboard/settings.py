"""Django settings of the standalone Bullpen site; the only module of the
dashboard that reads the environment.

Every variable is a row of the table in gpu_workers/settings.py (its default,
how its text parses, its doc); `environ_values` reads them all, and each
BULLPEN_* row both apps read becomes the Django setting of that name (a list
as a list). Code reads those through `dashboard.shared.conf.get()`, which
gives a host project that sets none of them the same defaults.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from dashboard.channel_layers import channel_layers
from dashboard.dburl import parse_database_url
from gpu_workers.settings import BY_ATTR, environ_values, named

_env = environ_values(os.environ)


def _read(attr: str) -> Any:
    """The value of the row whose field is `attr` (gpu_workers/settings.py)."""
    return _env[named(attr)]


globals().update(
    {
        row.name: list(_env[row.name])
        if isinstance(_env[row.name], tuple)
        else _env[row.name]
        for row in BY_ATTR.values()
        if row.name.startswith("BULLPEN_")
    }
)

BASE_DIR = Path(__file__).resolve().parent.parent
#: The standalone site's own templates/ and static/ (its layout, error pages
#: and stylesheet): beside manage.py in a checkout, <prefix>/share/bullpen
#: installed (pyproject.toml data-files). The apps carry theirs inside them.
SITE_FILES = (
    BASE_DIR
    if (BASE_DIR / "templates").is_dir()
    else Path(sys.prefix) / "share" / "bullpen"
)
#: Where Bullpen keeps its files (the SQLite database, the access log): the
#: checkout when run from it (`make run`), else (installed) the current directory.
DATA_DIR = Path(
    _read("data_dir")
    or (BASE_DIR if (BASE_DIR / "manage.py").is_file() else Path.cwd())
).resolve()

#: Production is the default: DEBUG only when asked for (it shows settings on
#: every error page), and no start without a secret key (it signs sessions,
#: CSRF tokens and job tickets). `make run` generates one and keeps it beside
#: its database; tests set one.
DEBUG: bool = _env["DJANGO_DEBUG"]
SECRET_KEY: str = _env["DJANGO_SECRET_KEY"]
if not SECRET_KEY:
    raise SystemExit(
        "DJANGO_SECRET_KEY is not set: set it to a long random value, e.g. "
        "DJANGO_SECRET_KEY=$(python -c 'import secrets; "
        "print(secrets.token_urlsafe(50))') (make run makes and keeps one itself)"
    )
ALLOWED_HOSTS = list(_env["DJANGO_ALLOWED_HOSTS"])

# --- HTTPS (on for a server behind TLS; off by default so that `make run`
# works over plain HTTP on localhost). `manage.py check --deploy` is clean
# with DJANGO_SECURE_COOKIES=1, DJANGO_SECURE_SSL_REDIRECT=1 and
# DJANGO_SECURE_HSTS_SECONDS>0 (+ _INCLUDE_SUBDOMAINS=1, _PRELOAD=1). ---
#: Session and CSRF cookies only over HTTPS.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _env["DJANGO_SECURE_COOKIES"]
#: Plain-HTTP requests are redirected to HTTPS.
SECURE_SSL_REDIRECT = _env["DJANGO_SECURE_SSL_REDIRECT"]
#: Load balancers probe, and Prometheus inside the cluster scrapes, over plain
#: HTTP: no redirect to https for these.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
#: Strict-Transport-Security max-age (0: no header).
SECURE_HSTS_SECONDS = _env["DJANGO_SECURE_HSTS_SECONDS"]
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env["DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS"]
SECURE_HSTS_PRELOAD = _env["DJANGO_SECURE_HSTS_PRELOAD"]
#: Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and strips it
#: from clients): "1" trusts it to say the request was HTTPS.
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https")
    if _env["DJANGO_SECURE_PROXY_SSL_HEADER"]
    else None
)
#: Origins trusted for CSRF (e.g. https://bullpen.example.com behind a proxy).
CSRF_TRUSTED_ORIGINS = list(_env["DJANGO_CSRF_TRUSTED_ORIGINS"])
#: Every login (the dashboard's, Django admin's, any authenticate() call) goes
#: through the throttle: Django's ModelBackend with each attempt reserved in
#: Redis before its password is checked (dashboard/console/login_throttle.py).
AUTHENTICATION_BACKENDS = ["dashboard.console.login_throttle.ThrottledModelBackend"]
#: Redis holding the queues (BullMQ 6 layout) and Bullpen's own keys.
REDIS_URL: str = _env["REDIS_URL"]

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
        # The site's own layout and error pages (templates/site/, next to
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
#: the db-path setting (db.sqlite3 in DATA_DIR). A bad DATABASE_URL is reported
#: by bullpen.E009 at start, through a backend that refuses every query.
DATABASE_URL: str = _env["DATABASE_URL"]
#: Seconds a PostgreSQL connection is reused (checked before reuse) by the
#: live sockets and commands; HTTP requests under daphne close theirs at
#: their end (dashboard/console/db.py).
_conn_max_age = _read("db_conn_max_age")
BULLPEN_DATABASE_URL_ERROR = ""
try:
    _db = (
        parse_database_url(DATABASE_URL, DATA_DIR, _conn_max_age)
        if DATABASE_URL
        else {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _read("db_path") or str(DATA_DIR / "db.sqlite3"),
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
STATIC_ROOT = _read("static_root") or (
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
#: Log lines as text, or as one JSON object per line ("json").
if _read("log_format") == "json":
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

# --- Live updates (dashboard/live) ---
#: The channel layer (same Redis, own keys) carries only the live sockets'
#: control messages between dashboard processes (dashboard/console/live/access.py:
#: session ended, access changed); events go from each process's reader to
#: its own sockets in memory.
CHANNEL_LAYERS = channel_layers(
    REDIS_URL,
    f"{_read('namespace')}:asgi",
    _read("redis_connect_timeout_s"),
    _read("redis_timeout_s"),
)
