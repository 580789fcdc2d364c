"""The SaaS backend's webhook endpoint: verifies each request's signature
(the README's snippet) and records every job's events in arrival order."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def verify_bullpen_webhook(
    secret: str, body: bytes, timestamp: str, signature: str, tolerance_s: int = 300
) -> bool:
    """True when the body was signed with `secret` less than 5 minutes ago."""
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs(time.time() - ts) > tolerance_s:
        return False
    mac = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256)
    expected = "v1=" + mac.hexdigest()
    return any(hmac.compare_digest(expected, s.strip()) for s in signature.split(","))


class WebhookReceiver:
    """POST /hooks/bullpen on 127.0.0.1: 401 for a bad signature, else 204."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.rejected = 0
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                ok = verify_bullpen_webhook(
                    owner.secret,
                    body,
                    self.headers.get("X-Bullpen-Timestamp", ""),
                    self.headers.get("X-Bullpen-Signature", ""),
                )
                if ok:
                    owner._record(json.loads(body))
                else:
                    with owner._lock:
                        owner.rejected += 1
                self.send_response(204 if ok else 401)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/bullpen"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _record(self, payload: dict[str, Any]) -> None:
        with self._lock:
            if payload["id"] in self._seen:  # at-least-once delivery: drop repeats
                return
            self._seen.add(payload["id"])
            self.by_job[payload["job_id"]].append(payload)

    def events(self, job_id: str) -> list[str]:
        """The events received for a job, in arrival order."""
        with self._lock:
            return [p["event"] for p in self.by_job.get(job_id, [])]

    def close(self) -> None:
        """Stop listening."""
        self.server.shutdown()
        self.server.server_close()
