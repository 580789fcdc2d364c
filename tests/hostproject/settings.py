"""Settings of the host project: its own, written as a team's existing
project would be, with what docs/embedding.md adds for Bullpen marked."""

from __future__ import annotations

import os

from dashboard.channel_layers import channel_layers

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "host-tests-only-" + "h" * 50)
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Bullpen:
    "dashboard.console",
    "dashboard.api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Bullpen:
    "dashboard.console.middleware.ContentSecurityPolicyMiddleware",
    "dashboard.console.middleware.RedisUnavailableMiddleware",
]

ROOT_URLCONF = "tests.hostproject.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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
        "NAME": os.environ.get("HOST_DB_PATH", ":memory:"),
    }
}
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Bullpen: logins go through the login throttle (Django's ModelBackend with
# failed logins counted in Redis); bullpen.E013 says so when it is missing.
AUTHENTICATION_BACKENDS = ["dashboard.console.login_throttle.ThrottledModelBackend"]
#: The host's own login page: the dashboard sends its users to its own.
LOGIN_URL = "/accounts/login/"

# Bullpen: the Redis holding the queues (every BULLPEN_* setting has a default).
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# (tests/api/test_body_limit.py sets a small cap)
if "BULLPEN_API_MAX_BODY_BYTES" in os.environ:
    BULLPEN_API_MAX_BODY_BYTES = int(os.environ["BULLPEN_API_MAX_BODY_BYTES"])
# Bullpen: the live sockets' control messages between server processes (a
# logout closes the user's sockets in every process at once); bullpen.W002
# says what happens without it.
CHANNEL_LAYERS = channel_layers(REDIS_URL, "host:asgi")
