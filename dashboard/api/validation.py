"""Request validation: names, the JSON body (size, type, syntax), the enqueue
schema with a stable error code per field, and webhook URLs. (Each queue's
own JSON Schema is checked by `models.QueueSchema.check_data`.)"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
from django.http import HttpRequest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from jsonschema.exceptions import best_match

from queues.events import StreamId
from queues.exceptions import InvalidJobId
from queues.names import SAFE_QUEUE_NAME_RULE, is_safe_queue_name
from queues.options import validate_job_id

from ..shared import conf
from . import defaults, schemas
from .exceptions import BadRequest, PayloadTooLarge, Unprocessable, UnsupportedMediaType
from .grouping import GROUP_ID_RULE
from .webhooks import ssrf

# Python's `$` also matches before a final newline, so every check below uses
# fullmatch (JSON Schema's ECMA-262 `$` does not).
JOB_NAME_RE = re.compile(schemas.JOB_NAME_PATTERN)
CLIENT_JOB_ID_RE = re.compile(schemas.CLIENT_JOB_ID_PATTERN)
JOB_ID_RE = re.compile(schemas.JOB_ID_PATTERN)
STREAM_ID_RE = re.compile(schemas.STREAM_ID_PATTERN)
IDEMPOTENCY_KEY_RE = re.compile(schemas.IDEMPOTENCY_KEY_PATTERN)

#: Option names of the API and the keyword arguments of `Queue.add`.
_QUEUE_OPTIONS = (
    "job_id",
    "priority",
    "delay",
    "attempts",
    "backoff",
    "lifo",
    "remove_on_complete",
    "remove_on_fail",
)


def check_queue_name(name: str) -> str:
    """A queue name from a URL."""
    if not is_safe_queue_name(name):
        raise BadRequest(
            "invalid_queue_name", f"queue names are {SAFE_QUEUE_NAME_RULE}"
        )
    return name


def check_job_id(job_id: str) -> str:
    """A job id from a URL."""
    if not JOB_ID_RE.fullmatch(job_id):
        raise BadRequest(
            "invalid_job_id", "job ids are 1-200 letters, digits, '_', '.', ':' or '-'"
        )
    return job_id


def check_stream_id(value: str) -> str:
    """A Last-Event-ID: a Redis stream id as the API publishes it (ASCII
    digits, both parts, nothing after) that Redis can take."""
    if not (STREAM_ID_RE.fullmatch(value) and StreamId.valid(value)):
        raise BadRequest(
            "invalid_last_event_id", "Last-Event-ID must be an event id we sent"
        )
    return value


def check_idempotency_key(value: str) -> str:
    """An Idempotency-Key header."""
    if not IDEMPOTENCY_KEY_RE.fullmatch(value):
        raise BadRequest(
            "invalid_idempotency_key",
            "Idempotency-Key must be 1-255 visible ASCII characters",
        )
    return value


def read_json_body(request: HttpRequest) -> Any:
    """The parsed JSON body, read only up to the size cap."""
    if request.content_type != "application/json":
        raise UnsupportedMediaType(
            "unsupported_media_type", "send the body as application/json"
        )
    cap = conf.get().max_body_bytes
    too_large = PayloadTooLarge(
        "payload_too_large", f"the body is over {cap} bytes", {"limit_bytes": cap}
    )
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > cap:
        raise too_large
    body = request.read(cap + 1)
    if len(body) > cap:
        raise too_large
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(
            "malformed_json", f"the body is not valid JSON: {exc}"
        ) from None
    if _depth(value) > defaults.MAX_JSON_DEPTH:
        raise BadRequest(
            "invalid_body",
            f"the body nests arrays or objects deeper than {defaults.MAX_JSON_DEPTH}",
        )
    return value


def read_checked_body(request: HttpRequest, schema: dict[str, Any]) -> Any:
    """The JSON body, checked against `schema`: BadRequest `invalid_body`
    naming where the first problem is."""
    body = read_json_body(request)
    error = best_match(Draft202012Validator(schema).iter_errors(body))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "body"
        raise BadRequest("invalid_body", f"{where}: {error.message}")
    return body


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in a parsed JSON value (iteratively)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level > defaults.MAX_JSON_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


@dataclass
class EnqueueRequest:
    """A validated enqueue request."""

    name: str
    data: Any
    options: dict[str, Any] = field(default_factory=dict)
    #: `options.group` as sent (None: not sent); see `grouping.job_group`.
    group: str | None = None
    webhook_url: str | None = None
    #: The events the job's own webhook is sent (all of them unless chosen).
    webhook_events: list[str] = field(
        default_factory=lambda: list(defaults.WEBHOOK_EVENTS)
    )


@lru_cache(maxsize=1)
def _enqueue_validator() -> Draft202012Validator:
    schema = dict(schemas.ENQUEUE_REQUEST)
    schema["properties"] = dict(schema["properties"], options=schemas.JOB_OPTIONS)
    return Draft202012Validator(schema)


def _error_for(error: SchemaError) -> BadRequest:
    """The stable code of a schema violation, from where it happened."""
    path = [str(p) for p in error.absolute_path]
    where = ".".join(path) or "body"
    details = {"field": where}
    if not path:
        if error.validator == "type":
            return BadRequest("invalid_body", "the body must be a JSON object", details)
        if error.validator == "required":
            return BadRequest("missing_field", error.message, details)
        return BadRequest("unknown_field", error.message, details)
    if path[0] == "name":
        return BadRequest(
            "invalid_job_name",
            "the job name must be 1-128 letters, digits or '_.:@/+-', "
            "starting with a letter, digit or '_'",
            details,
        )
    if path == ["options"] and error.validator == "additionalProperties":
        return BadRequest("unknown_option", error.message, details)
    if path[:2] == ["options", "job_id"]:
        return BadRequest(
            "invalid_job_id",
            "job_id must be 1-128 letters, digits, '_', '.' or '-'",
            details,
        )
    if path[:2] == ["options", "group"]:
        return BadRequest(
            "invalid_group",
            f"options.group: group ids are {GROUP_ID_RULE}",
            details,
        )
    if path[:2] == ["options", "webhook_url"]:
        return BadRequest(
            "invalid_webhook_url", "webhook_url must be an http(s) URL", details
        )
    return BadRequest("invalid_option", f"{where}: {error.message}", details)


def validate_enqueue(body: Any) -> EnqueueRequest:
    """Check an enqueue body against the published schema, then the rules a
    schema cannot say."""
    error = best_match(_enqueue_validator().iter_errors(body))
    if error is not None:
        raise _error_for(error)
    if not JOB_NAME_RE.fullmatch(body["name"]):
        raise _error_for(SchemaError("bad name", path=["name"]))
    options = dict(body.get("options") or {})
    job_id = options.get("job_id")
    if job_id is not None and not CLIENT_JOB_ID_RE.fullmatch(job_id):
        raise _error_for(SchemaError("bad job_id", path=["options", "job_id"]))
    if job_id is not None:
        try:
            validate_job_id(job_id)
        except InvalidJobId as exc:
            raise BadRequest(
                "invalid_job_id", str(exc), {"field": "options.job_id"}
            ) from None
    url = options.pop("webhook_url", None)
    events = options.pop("webhook_events", None) or list(defaults.WEBHOOK_EVENTS)
    if url is not None:
        check_webhook_url(url)
    return EnqueueRequest(
        name=body["name"],
        data={} if body.get("data") is None else body["data"],
        options={k: v for k, v in options.items() if k in _QUEUE_OPTIONS},
        group=options.get("group"),
        webhook_url=url,
        webhook_events=events,
    )


def webhook_policy() -> ssrf.Policy:
    """The destination policy in force (settings)."""
    c = conf.get()
    return ssrf.Policy(c.webhook_allow_private, c.webhook_allowed_networks)


def check_webhook_url(url: str) -> str:
    """Refuse a webhook URL that is malformed or names a forbidden address
    (what can be told without DNS; the sender checks again after resolving)."""
    try:
        target = ssrf.parse_url(url)
    except ssrf.DestinationRefused as exc:
        raise BadRequest(
            "invalid_webhook_url",
            f"webhook_url: {exc}",
            {"field": "options.webhook_url"},
        ) from None
    try:
        ssrf.check_without_dns(target, webhook_policy())
    except ssrf.DestinationRefused as exc:
        raise Unprocessable(
            "webhook_url_refused",
            f"webhook_url: {exc}; webhooks go to public addresses only",
            {"field": "options.webhook_url"},
        ) from None
    return url
