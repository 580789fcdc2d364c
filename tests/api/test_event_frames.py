"""SSE frames and webhook bodies are built from the one parser of stream
entries (queues.events.parse_entry), byte for byte as before: a progress's
data as `progress`, counts as the text the stream holds, other jobs' entries
left out of a job's SSE stream."""

from __future__ import annotations

from typing import Any

from dashboard.api import sse
from dashboard.api.webhooks.dispatcher import _payload
from queues import JobState
from queues.events import parse_entry

JOB = "7"


def _frames(entries: list[tuple[str, dict[str, str]]]) -> list[bytes]:
    """What a new SSE connection of job 7 sends for one read of `entries`
    (after `retry:` and the state event), until it ends or reads again."""
    steps = sse.job_events(JOB, None, max_s=60, keepalive_s=1)
    sent: list[bytes] = []
    reads = 0
    reply: Any = None
    try:
        while True:
            step = steps.send(reply)
            reply = None
            if isinstance(step, bytes):
                sent.append(step)
            elif isinstance(step, sse.LastId):
                reply = ("1-0", "1-0")
            elif isinstance(step, sse.JobNow):
                reply = (JobState.ACTIVE, None)
            elif isinstance(step, sse.Read):
                reads += 1
                if reads > 1:
                    steps.close()
                    break
                reply = entries
    except StopIteration:
        pass
    return sent[2:]


def test_sse_frames_are_unchanged() -> None:
    """Progress, delayed, retries-exhausted and failed, as the stream holds
    them; another job's entry is not sent; failed ends the stream."""
    frames = _frames(
        [
            ("2-0", {"event": "progress", "jobId": JOB, "data": '{"step":2}'}),
            ("3-0", {"event": "progress", "jobId": "8", "data": "5"}),
            ("4-0", {"event": "delayed", "jobId": JOB, "delay": "1700000000123"}),
            ("5-0", {"event": "retries-exhausted", "jobId": JOB, "attemptsMade": "3"}),
            (
                "6-0",
                {
                    "event": "failed",
                    "jobId": JOB,
                    "failedReason": "boom",
                    "prev": "active",
                },
            ),
            ("7-0", {"event": "progress", "jobId": JOB, "data": "99"}),
        ]
    )
    assert frames == [
        b'id: 2-0\nevent: progress\ndata: {"job_id":"7","progress":{"step":2}}\n\n',
        b'id: 4-0\nevent: delayed\ndata: {"job_id":"7","delay":"1700000000123"}\n\n',
        b"id: 5-0\nevent: retries-exhausted\n"
        b'data: {"job_id":"7","attemptsMade":"3"}\n\n',
        b"id: 6-0\nevent: failed\n"
        b'data: {"job_id":"7","failed_reason":"boom","prev":"active"}\n\n',
    ]


def test_sse_completed_frame_is_unchanged() -> None:
    """A return value parsed from its JSON (or left as text) and `prev`."""
    frames = _frames(
        [
            (
                "2-0",
                {"event": "completed", "jobId": JOB, "returnvalue": '{"a":[1,2.5]}'},
            ),
        ]
    )
    assert frames == [
        b"id: 2-0\nevent: completed\n"
        b'data: {"job_id":"7","returnvalue":{"a":[1,2.5]}}\n\n'
    ]
    text = _frames([("2-0", {"event": "completed", "jobId": JOB, "returnvalue": "ok"})])
    assert text == [
        b'id: 2-0\nevent: completed\ndata: {"job_id":"7","returnvalue":"ok"}\n\n'
    ]


def test_webhook_payloads_are_unchanged() -> None:
    """The body fields of progress, completed and failed (bytes or text)."""
    progress = parse_entry(
        b"1700000000123-4",
        {b"event": b"progress", b"jobId": b"7", b"data": b'{"p":1}'},
    )
    assert list(_payload("bull:render", progress).items()) == [
        ("event", "progress"),
        ("queue", "render"),
        ("job_id", "7"),
        ("event_id", "1700000000123-4"),
        ("timestamp", 1700000000123),
        ("progress", {"p": 1}),
    ]
    done = parse_entry("5-0", {"event": "completed", "jobId": "7", "returnvalue": "x"})
    assert _payload("bull:render", done)["returnvalue"] == "x"
    failed = parse_entry(
        "6-0", {"event": "failed", "jobId": "7", "failedReason": "boom"}
    )
    assert _payload("bull:render", failed)["failed_reason"] == "boom"
    assert "progress" not in _payload("bull:render", done)
