"""Jobs: enqueue, status, cancel/remove, and webhook deliveries."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse

from dashboard.shared.redaction import redact_fields, redact_text
from gpu_workers import Fleet
from gpu_workers.attempts import job_attempts
from gpu_workers.exceptions import ValidationError as FleetValidationError
from gpu_workers.waiting import explain
from queues import Job, JobState, ops
from queues.clients import recent_census
from queues.defaults import WORKER_CENSUS_MAX_AGE_S
from queues.exceptions import InvalidJobId, InvalidJobOptions, JobLocked
from queues.options import TENANT_MAX_CHARS, merge_job_options

from ...shared import conf
from .. import grouping, idempotency, schemas, store
from ..auth import make_ticket
from ..exceptions import ApiError, BadRequest, Conflict, NotFound
from ..handling import Call, json_response
from ..models import QueueSchema, QueueSettings
from ..operations import Param, operation
from ..validation import (
    EnqueueRequest,
    check_idempotency_key,
    read_json_body,
    validate_enqueue,
)
from ..webhooks import deliveries, registry
from .common import api_url, queue_of

_JOB = "/queues/{queue}/jobs/{job_id}"


def new_job_id() -> str:
    """An id for a job whose id must be known before it is added."""
    return "job-" + uuid.uuid4().hex


def job_body(queue_name: str, job: Job, state: JobState) -> dict[str, Any]:
    """A job as the API shows it (its content redacted as on the pages)."""
    return redact_fields(
        {
            "id": job.id,
            "queue": queue_name,
            "name": job.name,
            "state": state.value,
            "data": job.data,
            "progress": job.progress,
            "returnvalue": job.returnvalue,
            "failed_reason": job.failed_reason,
            "attempts_made": job.attempts_made,
            "attempts": job.attempts,
            "priority": job.priority,
            "delay": job.delay,
            "group": group_of(job),
            "timestamps": {
                "created": job.timestamp or None,
                "processed": job.processed_on,
                "finished": job.finished_on,
            },
        }
    )


def group_of(job: Job) -> str | None:
    """The job's group id (`opts.group.id`, docs/groups.md), None if none."""
    found = (job.opts or {}).get("group")
    group = found.get("id") if isinstance(found, dict) else None
    return group if isinstance(group, str) else None


def _enqueued(
    request: HttpRequest,
    queue_name: str,
    job_id: str,
    name: str,
    webhook: dict[str, Any] | None,
    status: int,
    job_ts: int | None,
) -> HttpResponse:
    path = f"/queues/{queue_name}/jobs/{job_id}"
    status_url = api_url(request, path)
    body = {
        "id": job_id,
        "queue": queue_name,
        "name": name,
        "status_url": status_url,
        "events_url": api_url(request, path + "/events"),
        "ticket": make_ticket(queue_name, job_id, job_ts),
        "webhook": webhook,
    }
    headers = {"Location": status_url}
    if status == 200:
        headers["Idempotent-Replayed"] = "true"
    return json_response(body, status, headers)


def _job_ts(queue_name: str, job_id: str) -> int | None:
    """The `timestamp` of the job now holding this id (None: no job)."""
    job = queue_of(queue_name).get_job(job_id, max_value_bytes=_TS_READ_BYTES)
    return None if job is None else int(job.timestamp)


#: Values read to learn a job's timestamp (its data is left out).
_TS_READ_BYTES = 64


def _add(
    call: Call,
    queue_name: str,
    req: EnqueueRequest,
    job_id: str | None,
    check_taken: bool,
    group: str | None,
) -> tuple[str, dict[str, Any] | None, int | None]:
    """Add the job; returns its id, its webhook and the `timestamp` that tells
    this job from any other that had or will have the same id."""
    q = queue_of(queue_name)
    client, keys, queue_key = store.client(), store.keys(), store.queue_key(queue_name)
    if job_id is not None and check_taken:
        if q.get_job_state(job_id) is not JobState.UNKNOWN:
            raise Conflict(
                "job_id_taken", f"queue {queue_name} already has a job {job_id}"
            )
        # A webhook recorded for an earlier job of this id is not this job's.
        registry.clear_job_webhook(client, keys, queue_key, job_id)
    job_ts = ops.now_ms()
    webhook = None
    if req.webhook_url is not None:
        assert call.principal is not None and call.principal.token is not None
        job_id = job_id or new_job_id()
        events = req.webhook_events
        registry.follow(client, keys, queue_key)
        registry.set_job_webhook(
            client,
            keys,
            queue_key,
            job_id,
            req.webhook_url,
            events,
            call.principal.token.webhook_secret,
            job_ts,
        )
        webhook = {"url": req.webhook_url, "events": events}
    options = merge_job_options(QueueSettings.job_defaults(queue_name), req.options)
    # The token's name (never its secret) travels in opts.tenant for the GPU
    # workers' GPU-time accounting; clients cannot set it (options schema).
    token = call.principal.token if call.principal is not None else None
    if token is not None and token.name:
        options["tenant"] = token.name[:TENANT_MAX_CHARS]
    if group is not None:
        options["group"] = group
    try:
        job = q.add(req.name, req.data, job_id=job_id, timestamp=job_ts, **options)
    except InvalidJobId as exc:
        raise BadRequest("invalid_job_id", str(exc)) from None
    except InvalidJobOptions as exc:
        raise BadRequest("invalid_option", str(exc)) from None
    if not check_taken:  # a retried request: the job may be the first attempt's
        return str(job.id), webhook, _job_ts(queue_name, str(job.id))
    return str(job.id), webhook, job_ts


@operation(
    method="POST",
    path="/queues/{queue}/jobs",
    operation_id="enqueueJob",
    summary="Enqueue a job",
    description="Returns at once with the job's id, its status URL and a "
    "read-only ticket. The options lie over the queue's default job options "
    "(set in the Django admin), key by key. With an Idempotency-Key, a retried "
    "request returns the first request's job (200, Idempotent-Replayed: true) "
    "and adds nothing.",
    scope="write",
    request_schema="EnqueueRequest",
    params=(
        Param(
            "Idempotency-Key",
            "header",
            {"type": "string", "pattern": schemas.IDEMPOTENCY_KEY_PATTERN},
            "Same key and body: same job, added once.",
        ),
    ),
    responses={
        201: ("Enqueued", "Enqueued"),
        200: ("Already enqueued by an earlier request with this key", "Enqueued"),
        409: ("Job id taken, or the keyed request is still running", None),
        422: ("Data fails the queue's JSON Schema, key reused, URL refused", None),
    },
)
def enqueue(request: HttpRequest, call: Call, queue: str) -> HttpResponse:
    """Validate, then add the job (once per Idempotency-Key)."""
    body = read_json_body(request)
    req = validate_enqueue(body)
    QueueSchema.check_data(queue, req.data)
    token = call.principal.token if call.principal is not None else None
    group = grouping.job_group(token, req.group)
    job_id = req.options.pop("job_id", None)
    key = request.headers.get("Idempotency-Key")
    if key is None:
        added, webhook, job_ts = _add(
            call, queue, req, job_id, check_taken=True, group=group
        )
        return _enqueued(request, queue, added, req.name, webhook, 201, job_ts)
    assert call.principal is not None
    check_idempotency_key(key)
    client = store.client()
    fp = idempotency.fingerprint(queue, body)
    redis_key = store.keys().idempotency(
        call.principal.rate_key, store.queue_key(queue), key
    )
    claim = idempotency.claim(client, redis_key, fp, job_id or new_job_id())
    if not claim.add:
        webhook = None
        if req.webhook_url:
            webhook = {
                "url": req.webhook_url,
                "events": req.webhook_events,
            }
        job_ts = _job_ts(queue, claim.job_id)
        return _enqueued(request, queue, claim.job_id, req.name, webhook, 200, job_ts)
    try:
        added, webhook, job_ts = _add(
            call, queue, req, claim.job_id, check_taken=claim.fresh, group=group
        )
    except ApiError:
        idempotency.release(client, redis_key)
        raise
    idempotency.done(client, redis_key, fp, added)
    return _enqueued(request, queue, added, req.name, webhook, 201, job_ts)


@operation(
    method="GET",
    path=_JOB,
    operation_id="getJob",
    summary="A job's state, progress, result or failure, attempts and times, "
    "and why it is not running yet",
    scope="read",
    tickets=True,
    responses={200: ("The job", "Job"), 404: ("No such job", None)},
)
def get_job(request: HttpRequest, call: Call, queue: str, job_id: str) -> HttpResponse:
    """The job as it is now."""
    job, state = queue_of(queue).get_job_with_state(job_id)
    if job is None or not call.principal or not call.principal.owns(job):
        raise NotFound("job_not_found", f"queue {queue} has no job {job_id}")
    body = job_body(queue, job, state)
    body["waiting_reason"] = waiting_reason(queue, job, state)
    body["attempt_history"] = attempt_history(queue, job, state)
    return json_response(body)


def attempt_history(queue: str, job: Job, state: JobState) -> dict[str, Any]:
    """The job's attempts (gpu_workers/attempts.py), errors redacted."""
    c = conf.get()
    fleet = Fleet(store.client(), c.namespace)
    found = job_attempts(fleet, c.prefix, queue, job, state.value).as_dict()
    for item in found["items"]:
        item["error"] = redact_text(item["error"]) or None
    return found


def waiting_reason(queue: str, job: Job, state: JobState) -> dict[str, Any] | None:
    """Why the job is not running yet (gpu_workers/waiting), or None when it
    is not waiting."""
    c = conf.get()
    found = explain(
        store.client(),
        c.prefix,
        queue,
        [(job, state.value)],
        namespace=c.namespace,
        handler_modules=c.handler_modules,
        workers=recent_census(store.client(), WORKER_CENSUS_MAX_AGE_S),
        shown=redact_text,
    ).get(job.id)
    return None if found is None else found.as_dict()


@operation(
    method="DELETE",
    path=_JOB,
    operation_id="cancelJob",
    summary="Remove a job that is not running; ask a running one to stop",
    description="A waiting, delayed or finished job is removed (200), a flow "
    "parent with its children (409 and nothing removed while one of them runs). "
    "A running "
    "job is asked to stop (202): GPU workers stop it and it fails with reason "
    '"cancelled by operator"; other workers let it finish.',
    scope="write",
    responses={
        200: ("Removed", "Removed"),
        202: ("Cancel requested (the job is running)", "Removed"),
        404: ("No such job", None),
        409: ("A child of the job is running (nothing was removed)", None),
    },
)
def cancel_job(
    request: HttpRequest, call: Call, queue: str, job_id: str
) -> HttpResponse:
    """Remove, or request a cancel."""
    q = queue_of(queue)
    state = q.get_job_state(job_id)
    if state is JobState.UNKNOWN:
        raise NotFound("job_not_found", f"queue {queue} has no job {job_id}")
    if state is not JobState.ACTIVE:
        try:
            if q.remove_job(job_id):
                return json_response(
                    {"id": job_id, "result": "removed", "previous_state": state.value}
                )
            raise NotFound("job_not_found", f"queue {queue} has no job {job_id}")
        except JobLocked:
            # Removal takes the job's children too: a running child refuses it.
            if q.get_job_state(job_id) is not JobState.ACTIVE:
                raise Conflict(
                    "job_has_running_child",
                    f"job {job_id} has a child that a worker is running; "
                    "remove it once the child has finished",
                ) from None
            # Otherwise it started meanwhile: cancel it instead.
    try:
        c = conf.get()
        Fleet(store.client(), c.namespace).request_cancel(queue, job_id, c.prefix)
    except FleetValidationError as exc:
        raise NotFound("job_not_found", str(exc)) from None
    return json_response(
        {"id": job_id, "result": "cancel_requested", "previous_state": "active"}, 202
    )


@operation(
    method="GET",
    path=_JOB + "/deliveries",
    operation_id="getJobDeliveries",
    summary="The job's webhook delivery attempts and outcomes, newest first",
    scope="read",
    responses={200: ("Delivery attempts", "Deliveries"), 404: ("No such job", None)},
    tags=("webhooks",),
)
def job_deliveries(
    request: HttpRequest, call: Call, queue: str, job_id: str
) -> HttpResponse:
    """A job's delivery log."""
    rows = deliveries.for_job(
        store.client(), store.keys(), store.queue_key(queue), job_id
    )
    if not rows and queue_of(queue).get_job_state(job_id) is JobState.UNKNOWN:
        raise NotFound("job_not_found", f"queue {queue} has no job {job_id}")
    return json_response({"job_id": job_id, "deliveries": rows})
