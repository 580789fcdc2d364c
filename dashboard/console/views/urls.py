"""Routes of every page and its actions (included by dashboard/urls.py): the
queue and job pages, search, triage, the audit log, the GPU page, login,
/metrics for Prometheus, /healthz and /readyz; names in the `bullpen`
namespace (`{% url 'bullpen:queue' ... %}`)."""

from __future__ import annotations

from django.urls import path, register_converter
from django.urls.converters import PathConverter

from . import (
    audit,
    auth,
    bulk,
    charts,
    gpus,
    gputime,
    groups,
    health,
    job,
    metrics,
    overview,
    queue,
    redis_panel,
    schedulers,
    search,
    triage,
)


class JobIdConverter(PathConverter):
    """Any job or scheduler id, slashes and line breaks included (another
    client's ids may hold them; `path` stops at a newline)."""

    regex = r"[\s\S]+"


register_converter(JobIdConverter, "job_id")

app_name = "bullpen"

Q = "queues/<str:prefix>/<str:name>/"
J = Q + "jobs/<job_id:job_id>/"

urlpatterns = [
    path("metrics", metrics.metrics, name="metrics"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("gpus/", gpus.gpus_page, name="gpus"),
    path("gpus/fragments/hosts/", gpus.hosts_fragment, name="gpus-hosts"),
    path("gpus/grid.json", gpus.grid_json, name="gpus-grid"),
    path("gpus/fragments/capacity/", gpus.capacity_fragment, name="gpus-capacity"),
    path("gpus/actions/scale/", gpus.scale, name="gpus-scale"),
    path("gpus/actions/pin/", gpus.pin, name="gpus-pin"),
    path("gpus/actions/unpin/", gpus.unpin, name="gpus-unpin"),
    path("gpu-time/", gputime.gpu_time_page, name="gpu-time"),
    path("gpu-time.csv", gputime.gpu_time_csv, name="gpu-time-csv"),
    # The Redis page and the workers page (issue 15).
    path("redis/", redis_panel.redis_page, name="redis"),
    path("redis/fragments/servers/", redis_panel.redis_fragment, name="redis-servers"),
    path("workers/", redis_panel.workers_page, name="workers"),
    path("workers/fragments/list/", redis_panel.workers_fragment, name="workers-list"),
    # Charts over time (issue 15): JSON series, drawn by charts.js.
    path("series/", charts.overall_series, name="series-overall"),
    path("gpus/series/", charts.gpu_series, name="gpus-series"),
    path(Q + "series/", charts.queue_series, name="queue-series"),
    path("", overview.overview, name="overview"),
    path("fragments/queues/", overview.queue_table, name="queue-table"),
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
    path("search/", search.search, name="search"),
    path("audit/", audit.audit_log, name="audit"),
    path("triage/", triage.triage_index, name="triage-index"),
    path("triage/<str:prefix>/<str:name>/", triage.triage, name="triage"),
    path(
        "triage/<str:prefix>/<str:name>/actions/<slug:verb>/",
        triage.triage_action,
        name="triage-action",
    ),
    path(Q, queue.queue_page, name="queue"),
    path(Q + "fragments/jobs/", queue.job_list, name="queue-jobs"),
    path(Q + "actions/<slug:verb>/", queue.queue_action, name="queue-action"),
    # Lists you can act on (issue 15): selections, batches, export.
    path(Q + "bulk/actions/run/", bulk.bulk_action, name="queue-bulk"),
    # Export is a read (view permission), not an action: no /actions/ path.
    path(Q + "export/", bulk.export_jobs, name="queue-export"),
    path(Q + "fragments/batch/", bulk.batch_fragment, name="queue-batch"),
    path(
        Q + "batches/<slug:batch_id>/actions/cancel/",
        bulk.batch_cancel,
        name="batch-cancel",
    ),
    # The job schedulers page (issue 15); an id another client made may hold
    # slashes and line breaks (the job id converter takes any of them).
    path(Q + "schedulers/", schedulers.schedulers_page, name="schedulers"),
    path(
        Q + "schedulers/actions/create/",
        schedulers.create_action,
        name="scheduler-create",
    ),
    path(
        Q + "schedulers/<job_id:scheduler_id>/actions/<slug:verb>/",
        schedulers.scheduler_action,
        name="scheduler-action",
    ),
    # A queue's groups (issue 25); a group id may hold slashes: actions first.
    path(Q + "groups/", groups.groups_page, name="groups"),
    path(
        Q + "groups/<job_id:group_id>/actions/<slug:verb>/",
        groups.group_action,
        name="group-action",
    ),
    path(Q + "groups/<job_id:group_id>/", groups.group_page, name="group"),
    # Job routes: actions and fragments first, as a job id may hold slashes.
    path(J + "actions/<slug:verb>/", job.job_action, name="job-action"),
    path(J + "fragments/detail/", job.job_detail, name="job-detail"),
    path(J, job.job_page, name="job"),
]
