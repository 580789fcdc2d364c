"""`/healthz` and `/readyz` for load balancers and orchestrators.

`/healthz` answers 200 while the process serves requests, touching neither
Redis nor the database. `/readyz` answers 200 when Redis answers PING (within
`PROBE_TIMEOUT_S`, 2 s: a hung Redis is "down" then, not a 30 s wait), the
database answers `SELECT 1` and no migration is left unapplied, else 503
naming what failed. Neither needs a login nor /metrics' allowed networks:
they say only whether the process can serve, and the reasons they give hold
no passwords (Redis and database errors name a host at most).
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from dashboard.shared import redis as dashboard_redis
from queues.outages import describe

#: Set once every migration was found applied: migrations are not unapplied
#: under a running process, so later probes skip the (costly) graph walk.
_migrations_applied = False


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 while the process serves."""
    return JsonResponse({"status": "ok"})


def _redis() -> str:
    try:
        dashboard_redis.client(dashboard_redis.PROBE_TIMEOUT_S).ping()
    except Exception as exc:  # noqa: BLE001 - any failure is "down", named
        return f"down: {describe(exc)}"
    return "ok"


def _database() -> str:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return f"down: {describe(exc)}"
    return "ok"


def _migrations() -> str:
    global _migrations_applied
    if _migrations_applied:
        return "ok"
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        return f"unknown: {describe(exc)}"
    if plan:
        return f"{len(plan)} unapplied"
    _migrations_applied = True
    return "ok"


@require_GET
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when Redis, the database and its migrations are all ready, else
    503 naming each part's state."""
    parts = {"redis": _redis(), "database": _database()}
    parts["migrations"] = _migrations() if parts["database"] == "ok" else "unknown"
    ready = all(value == "ok" for value in parts.values())
    body = {"status": "ok" if ready else "unready", **parts}
    return JsonResponse(body, status=200 if ready else 503)


def forget_migrations() -> None:
    """Check migrations again on the next probe (tests)."""
    global _migrations_applied
    _migrations_applied = False
