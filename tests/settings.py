"""The tests' settings: the dashboard's, with the secret key that production
settings require set explicitly. Servers the tests start inherit it through
the environment."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-" + "s" * 50)

from dashboard.settings import *  # noqa: E402,F403
