"""Django settings for Bullpen; the only module that reads the environment."""

from __future__ import annotations

import os
import socket
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")

#: Redis holding the queues (BullMQ 6 layout) and Bullpen's own keys.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
#: Key prefixes whose queues the dashboard discovers.
BULLPEN_PREFIXES = [p for p in os.environ.get("BULLPEN_PREFIXES", "bull").split(",") if p]
#: Queues shown even before they have any key in Redis.
BULLPEN_QUEUES = [q for q in os.environ.get("BULLPEN_QUEUES", "").split(",") if q]

# --- GPU workers (`manage.py runworkers` hands these to gpu_workers) ---
#: Bullpen's own Redis namespace for heartbeats, scale targets and cancel flags.
BULLPEN_NAMESPACE = os.environ.get("BULLPEN_NAMESPACE", "bullpen")
#: This host's name in the worker registry (unique per supervisor).
BULLPEN_HOSTNAME = os.environ.get("BULLPEN_HOSTNAME") or socket.gethostname()
#: auto (NVML, else CPU-only) | nvml | none | sim:2x24GiB (simulated devices).
BULLPEN_GPUS = os.environ.get("BULLPEN_GPUS", "auto")
#: Queues worked on this host: `queue:slots,...` or a JSON list of objects with
#: queue, prefix, slots, max_slots, workers, gpus, vram_share, lock_duration_ms...
BULLPEN_WORKERS = os.environ.get("BULLPEN_WORKERS", "gpu:3")
#: Modules whose @handler functions worker processes import.
BULLPEN_HANDLER_MODULES = [m for m in os.environ.get(
    "BULLPEN_HANDLER_MODULES", "gpu_workers.demo_handlers,gpu_workers.torch_handlers"
).split(",") if m]
#: VRAM budget per GPU = total - reserve - one CUDA context per process - margin.
BULLPEN_VRAM_RESERVE = os.environ.get("BULLPEN_VRAM_RESERVE", "1GiB")
BULLPEN_VRAM_CUDA_CONTEXT = os.environ.get("BULLPEN_VRAM_CUDA_CONTEXT", "512MiB")
BULLPEN_VRAM_MARGIN = os.environ.get("BULLPEN_VRAM_MARGIN", "1GiB")
#: A worker crashing more than this many times within the window is marked failed.
BULLPEN_MAX_RESTARTS = int(os.environ.get("BULLPEN_MAX_RESTARTS", "5"))
BULLPEN_RESTART_WINDOW_S = float(os.environ.get("BULLPEN_RESTART_WINDOW_S", "60"))
#: How long SIGTERM lets running jobs finish before workers are killed.
BULLPEN_DRAIN_TIMEOUT_S = float(os.environ.get("BULLPEN_DRAIN_TIMEOUT_S", "60"))
#: Heartbeat period; records expire after the TTL when a host dies.
BULLPEN_HEARTBEAT_INTERVAL_S = float(os.environ.get("BULLPEN_HEARTBEAT_INTERVAL_S", "2"))
BULLPEN_HEARTBEAT_TTL_S = float(os.environ.get("BULLPEN_HEARTBEAT_TTL_S", "6"))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
ASGI_APPLICATION = "dashboard.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("BULLPEN_DB_PATH", str(BASE_DIR / "db.sqlite3")),
    }
}

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/admin/login/"
