"""Routes of the operator pages and their actions (included by dashboard/urls.py)."""

from __future__ import annotations

from django.urls import path, register_converter
from django.urls.converters import PathConverter

from . import audit, auth, job, overview, queue, search, triage


class JobIdConverter(PathConverter):
    """Any job id, slashes and line breaks included (another client's ids may
    hold them; `path` stops at a newline)."""

    regex = r"[\s\S]+"


register_converter(JobIdConverter, "job_id")

Q = "queues/<str:prefix>/<str:name>/"
J = Q + "jobs/<job_id:job_id>/"

urlpatterns = [
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
    # Job routes: actions and fragments first, as a job id may hold slashes.
    path(J + "actions/<slug:verb>/", job.job_action, name="job-action"),
    path(J + "fragments/detail/", job.job_detail, name="job-detail"),
    path(J, job.job_page, name="job"),
]
