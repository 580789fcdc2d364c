"""A stand-in for a hosted embedding API, on 127.0.0.1: POST /embed
{"text": ...} -> {"embedding": [...]}. Like the real ones it answers 429 to
more than `limit` requests in any one-second window, and it can be taken
down (503) to play an outage."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def embed(text: str, dims: int = 8) -> list[float]:
    """A deterministic fake embedding."""
    digest = hashlib.sha256(text.encode()).digest()
    return [round(b / 255, 4) for b in digest[:dims]]


class EmbeddingApi:
    """The server, its counters, and `down()` / `up()` for the outage."""

    def __init__(self, limit_per_s: int) -> None:
        self.limit_per_s = limit_per_s
        self.served = 0
        self.too_many = 0
        self.unavailable = 0
        self.peak_per_s = 0
        self._recent: deque[float] = deque()
        self._down = False
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer = owner._answer(body)
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/embed"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _answer(self, body: bytes) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self._down:
                self.unavailable += 1
                return 503, {"error": "service unavailable"}
            now = time.monotonic()
            while self._recent and now - self._recent[0] >= 1.0:
                self._recent.popleft()
            if len(self._recent) >= self.limit_per_s:
                self.too_many += 1
                return 429, {"error": "rate limit exceeded"}
            self._recent.append(now)
            self.peak_per_s = max(self.peak_per_s, len(self._recent))
            self.served += 1
        return 200, {"embedding": embed(json.loads(body)["text"])}

    def down(self) -> None:
        """Start the outage: every request gets a 503."""
        with self._lock:
            self._down = True

    def up(self) -> None:
        """End the outage."""
        with self._lock:
            self._down = False

    def close(self) -> None:
        """Stop listening."""
        self.server.shutdown()
        self.server.server_close()
