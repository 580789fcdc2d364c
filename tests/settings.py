"""The tests' settings: the dashboard's, with the secret key that production
settings require set explicitly. Servers the tests start inherit it through
the environment. The database is SQLite, or PostgreSQL on a run with
BULLPEN_TEST_DATABASE=postgres (tests/testdb.py)."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-" + "s" * 50)

from dashboard.settings import *  # noqa: E402,F403
from tests import testdb  # noqa: E402

if testdb.ON_POSTGRES:
    # BULLPEN_TEST_DATABASE=postgres: the PostgreSQL run (tests/testdb.py).
    DATABASES = {"default": testdb.django_database()}

# No sampler thread in the test process (an in-process ASGI application
# starts one): it would write series keys into the shared test Redis while
# other tests count keys. Tests of sampling drive SeriesSampler themselves.
BULLPEN_SERIES_SAMPLING = False
