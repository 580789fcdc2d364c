"""Every validation error: a 4xx JSON body with its stable code, never a 500
or a traceback."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.api import schemas
from queues import Queue
from tests.api.conftest import ApiClient

ENQUEUE_CASES: list[tuple[str, Any, int, str]] = [
    ("not json", b"{", 400, "malformed_json"),
    ("not an object", b"[1, 2]", 400, "invalid_body"),
    (
        "nested too deep",
        b'{"name": "a", "data": ' + b"[" * 300 + b"]" * 300 + b"}",
        400,
        "invalid_body",
    ),
    ("no name", {}, 400, "missing_field"),
    ("unknown field", {"name": "a", "colour": "red"}, 400, "unknown_field"),
    ("unknown option", {"name": "a", "options": {"color": 1}}, 400, "unknown_option"),
    ("empty name", {"name": ""}, 400, "invalid_job_name"),
    ("name with space", {"name": "a b"}, 400, "invalid_job_name"),
    ("name ending in newline", {"name": "ab\n"}, 400, "invalid_job_name"),
    ("name not a string", {"name": 5}, 400, "invalid_job_name"),
    (
        "digit job id",
        {"name": "a", "options": {"job_id": "123"}},
        400,
        "invalid_job_id",
    ),
    (
        "colon job id",
        {"name": "a", "options": {"job_id": "a:b"}},
        400,
        "invalid_job_id",
    ),
    (
        "queue key job id",
        {"name": "a", "options": {"job_id": "stalled-check"}},
        400,
        "invalid_job_id",
    ),
    (
        "signed integer job id",
        {"name": "a", "options": {"job_id": "-7"}},
        400,
        "invalid_job_id",
    ),
    (
        "negative priority",
        {"name": "a", "options": {"priority": -1}},
        400,
        "invalid_option",
    ),
    (
        "huge priority",
        {"name": "a", "options": {"priority": 2**21}},
        400,
        "invalid_option",
    ),
    ("text delay", {"name": "a", "options": {"delay": "soon"}}, 400, "invalid_option"),
    ("zero attempts", {"name": "a", "options": {"attempts": 0}}, 400, "invalid_option"),
    (
        "custom backoff",
        {"name": "a", "options": {"backoff": {"type": "custom"}}},
        400,
        "invalid_option",
    ),
    (
        "bad retention",
        {"name": "a", "options": {"remove_on_fail": "yes"}},
        400,
        "invalid_option",
    ),
    (
        "bad webhook events",
        {
            "name": "a",
            "options": {
                "webhook_url": "https://example.com/h",
                "webhook_events": ["done"],
            },
        },
        400,
        "invalid_option",
    ),
    (
        "ftp webhook",
        {"name": "a", "options": {"webhook_url": "ftp://example.com/"}},
        400,
        "invalid_webhook_url",
    ),
    (
        "webhook with credentials",
        {"name": "a", "options": {"webhook_url": "https://u:p@example.com/"}},
        400,
        "invalid_webhook_url",
    ),
    (
        "webhook without host",
        {"name": "a", "options": {"webhook_url": "http:///x"}},
        400,
        "invalid_webhook_url",
    ),
    (
        "private webhook",
        {"name": "a", "options": {"webhook_url": "http://10.0.0.7/h"}},
        422,
        "webhook_url_refused",
    ),
    (
        "loopback webhook",
        {"name": "a", "options": {"webhook_url": "http://127.0.0.1:8000/h"}},
        422,
        "webhook_url_refused",
    ),
    (
        "localhost webhook",
        {"name": "a", "options": {"webhook_url": "http://localhost/h"}},
        422,
        "webhook_url_refused",
    ),
    (
        "metadata webhook",
        {"name": "a", "options": {"webhook_url": "http://169.254.169.254/latest"}},
        422,
        "webhook_url_refused",
    ),
    (
        "mapped loopback webhook",
        {"name": "a", "options": {"webhook_url": "http://[::ffff:127.0.0.1]/h"}},
        422,
        "webhook_url_refused",
    ),
    (
        "integer loopback webhook",
        {"name": "a", "options": {"webhook_url": "http://2130706433/h"}},
        422,
        "webhook_url_refused",
    ),
]


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code
    assert code in schemas.ERROR_CODES[status]
    assert "Traceback" not in error["message"]
    return dict(error)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("case", "body", "status", "code"), ENQUEUE_CASES, ids=[c[0] for c in ENQUEUE_CASES]
)
def test_enqueue_validation_errors(
    api: ApiClient, q: Queue, qname: str, case: str, body: Any, status: int, code: str
) -> None:
    """Each invalid enqueue body gets its code, and nothing is enqueued."""
    assert_error(api.post_json(f"/api/v1/queues/{qname}/jobs", body), status, code)
    assert sum(q.get_counts().values()) == 0


@pytest.mark.django_db
@pytest.mark.parametrize("queue", ["bad$name", ".hidden", "-x", "a" * 101, "a%20b"])
def test_invalid_queue_name(api: ApiClient, queue: str) -> None:
    """Queue names in the path are checked."""
    assert_error(api.get(f"/api/v1/queues/{queue}"), 400, "invalid_queue_name")
    assert_error(
        api.post_json(f"/api/v1/queues/{queue}/jobs", {"name": "a"}),
        400,
        "invalid_queue_name",
    )


@pytest.mark.django_db
@pytest.mark.parametrize("job_id", ["a%20b", "x" * 201, "%C3%A9"])
def test_invalid_job_id_in_path(api: ApiClient, qname: str, job_id: str) -> None:
    """Job ids in the path are checked."""
    assert_error(
        api.get(f"/api/v1/queues/{qname}/jobs/{job_id}"), 400, "invalid_job_id"
    )


@pytest.mark.django_db
@pytest.mark.parametrize("job_id", ["wait", "meta", "events", "1:logs"])
def test_job_ids_naming_queue_keys_are_not_found(
    api: ApiClient, q: Queue, qname: str, job_id: str
) -> None:
    """Reading a job whose id names one of the queue's keys answers 404, not a
    500 from WRONGTYPE."""
    q.add("a", {}).log("line")
    q.client.xadd(q.keys.events, {"event": "x"})
    q.client.hset(q.keys.meta, "opts.maxLenEvents", 10)
    assert_error(api.get(f"/api/v1/queues/{qname}/jobs/{job_id}"), 404, "job_not_found")


@pytest.mark.django_db
def test_payload_over_the_cap_is_413(api: ApiClient, settings: Any, qname: str) -> None:
    """A body over BULLPEN_API_MAX_BODY_BYTES is refused before it is parsed."""
    settings.BULLPEN_API_MAX_BODY_BYTES = 1024
    body = {"name": "a", "data": {"blob": "x" * 2000}}
    error = assert_error(
        api.post_json(f"/api/v1/queues/{qname}/jobs", body), 413, "payload_too_large"
    )
    assert error["details"] == {"limit_bytes": 1024}
    small = {"name": "a", "data": {"blob": "x" * 900}}
    assert api.post_json(f"/api/v1/queues/{qname}/jobs", small).status_code == 201


@pytest.mark.django_db
def test_body_not_json_is_415(api: ApiClient, qname: str) -> None:
    """Only application/json bodies are read."""
    response = api.post_json(
        f"/api/v1/queues/{qname}/jobs",
        "name=a",
        content_type="application/x-www-form-urlencoded",
    )
    assert_error(response, 415, "unsupported_media_type")


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["has space", "x" * 256, "é"])
def test_invalid_idempotency_key(api: ApiClient, qname: str, key: str) -> None:
    """Idempotency-Key is 1-255 visible ASCII characters."""
    response = api.post_json(
        f"/api/v1/queues/{qname}/jobs", {"name": "a"}, HTTP_IDEMPOTENCY_KEY=key
    )
    assert_error(response, 400, "invalid_idempotency_key")


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["yesterday", "12", "0-20000000000000000000"])
def test_invalid_last_event_id(
    api: ApiClient, q: Queue, qname: str, value: str
) -> None:
    """Last-Event-ID must be a stream id Redis can take (found by the fuzzer:
    a sequence over 2**64 used to reach Redis mid-stream)."""
    job = q.add("a", {})
    response = api.get(
        f"/api/v1/queues/{qname}/jobs/{job.id}/events", HTTP_LAST_EVENT_ID=value
    )
    assert_error(response, 400, "invalid_last_event_id")


@pytest.mark.django_db
def test_unknown_routes_and_methods(api: ApiClient, qname: str) -> None:
    """Unknown paths are JSON 404s (any API version); a known path with the
    wrong method is a JSON 405 with Allow."""
    assert_error(api.get("/api/v1/nothing/here"), 404, "not_found")
    assert_error(api.get("/api/v2/queues"), 404, "not_found")
    assert_error(api.get("/api/"), 404, "not_found")
    response = api.put(
        f"/api/v1/queues/{qname}/jobs", b"{}", content_type="application/json"
    )
    assert_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "POST"
    assert_error(api.get(f"/api/v1/queues/{qname}/jobs/nope"), 404, "job_not_found")
    assert_error(api.delete(f"/api/v1/queues/{qname}/jobs/nope"), 404, "job_not_found")


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [True, False])
def test_a_bug_is_a_json_500_without_traceback(
    api: ApiClient,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    qname: str,
    debug: bool,
) -> None:
    """An unexpected exception in a view is logged and answered as a JSON 500
    with no traceback, whatever DEBUG says."""
    from dashboard.api.views import queues as queue_views

    settings.DEBUG = debug

    def broken(names: list[str]) -> Any:
        raise KeyError("secret internals")

    monkeypatch.setattr(queue_views, "_queue_bodies", broken)
    response = api.get(f"/api/v1/queues/{qname}")
    error = assert_error(response, 500, "internal_error")
    assert "secret" not in response.content.decode() and "KeyError" not in str(error)


@pytest.mark.django_db
def test_errors_outside_the_views_are_json_under_api(rf: Any) -> None:
    """The project's 404/500 handlers answer JSON under /api/ (DEBUG off)."""
    from dashboard import errors

    for response in (
        errors.handler404(rf.get("/api/x")),
        errors.handler500(rf.get("/api/x")),
    ):
        assert response["Content-Type"] == "application/json"
    assert errors.handler404(rf.get("/api/x")).status_code == 404
    assert errors.handler500(rf.get("/api/x")).status_code == 500


@pytest.mark.django_db
def test_redis_down_is_503(api: ApiClient, settings: Any, qname: str) -> None:
    """Without Redis the API answers 503 redis_unavailable."""
    from queues.devredis import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    assert_error(api.get(f"/api/v1/queues/{qname}"), 503, "redis_unavailable")


def test_openapi_error_codes_cover_every_code_raised() -> None:
    """Every code string the package raises is listed in the published enum."""
    import re
    from pathlib import Path

    import dashboard.api as pkg

    listed = {c for codes in schemas.ERROR_CODES.values() for c in codes}
    raised: set[str] = set()
    for path in Path(pkg.__file__).parent.rglob("*.py"):
        text = path.read_text()
        raised |= set(
            re.findall(
                r"(?:BadRequest|Unauthorized|Forbidden|NotFound|MethodNotAllowed|Conflict|"
                r"PayloadTooLarge|UnsupportedMediaType|Unprocessable|RateLimited|"
                r'Unavailable)\(\s*"([a-z_]+)"',
                text,
            )
        )
    assert raised <= listed, raised - listed
