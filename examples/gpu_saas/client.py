"""The SaaS backend's side of the API, with the standard library only:
enqueue (with an Idempotency-Key), poll the status, follow the SSE stream."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any


class BullpenClient:
    """A tiny client of /api/v1/."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                **(headers or {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def generate(
        self, queue: str, prompt: str, webhook_url: str, key: str, **options: Any
    ) -> dict[str, Any]:
        """Ask for an image; returns the enqueue answer (id, URLs, ticket)."""
        status, body = self._request(
            "POST",
            f"/api/v1/queues/{queue}/jobs",
            {
                "name": "generate",
                "data": {"prompt": prompt, **options.pop("data", {})},
                "options": {"webhook_url": webhook_url, **options},
            },
            headers={"Idempotency-Key": key},
        )
        if status not in (200, 201):
            raise RuntimeError(f"enqueue refused: {status} {body}")
        return dict(body)

    def status(self, queue: str, job_id: str) -> dict[str, Any]:
        """The job now."""
        return dict(self._request("GET", f"/api/v1/queues/{queue}/jobs/{job_id}")[1])

    def wait(self, queue: str, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """Poll until the job is completed or failed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.status(queue, job_id)
            if job["state"] in ("completed", "failed"):
                return job
            time.sleep(0.2)
        raise TimeoutError(f"job {job_id} did not finish in {timeout}s")

    def follow(
        self,
        events_url: str,
        ticket: str | None = None,
        last_event_id: str | None = None,
        timeout: float = 60.0,
    ) -> Iterator[dict[str, Any]]:
        """Server-Sent Events of a job, as a browser's EventSource gets them
        (with the job's ticket instead of a token when given)."""
        url = events_url + (f"?ticket={ticket}" if ticket else "")
        headers = {} if ticket else {"Authorization": f"Bearer {self.token}"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            message: dict[str, Any] = {}
            for raw in response:
                line = raw.decode().rstrip("\n")
                if not line:
                    if "event" in message:
                        yield message
                    message = {}
                elif line.startswith(("id: ", "event: ")):
                    name, _, value = line.partition(": ")
                    message[name] = value
                elif line.startswith("data: "):
                    message["data"] = json.loads(line[6:])
