"""Webhook signatures: HMAC-SHA256 over `{timestamp}.{body}`.

Every webhook carries two headers:

    X-Bullpen-Timestamp: 1767225600                 (unix seconds, when sent)
    X-Bullpen-Signature: v1=<64 hex digits>

A receiver recomputes the HMAC with its secret over the timestamp, a dot and
the raw body bytes, compares in constant time, and refuses timestamps more
than five minutes away from its clock (replays). `verify()` does all of that;
the README has a copy-paste version for receivers that do not use Bullpen.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

from ..exceptions import InvalidSignature

TIMESTAMP_HEADER = "X-Bullpen-Timestamp"
SIGNATURE_HEADER = "X-Bullpen-Signature"
EVENT_HEADER = "X-Bullpen-Event"
DELIVERY_HEADER = "X-Bullpen-Delivery"
TOLERANCE_S = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header value of a body sent at `timestamp`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def signature_headers(
    secret: str, body: bytes, now: float | None = None
) -> dict[str, str]:
    """The timestamp and signature headers of a webhook sent now."""
    timestamp = int(time.time() if now is None else now)
    return {
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(secret, timestamp, body),
    }


def verify(
    secret: str,
    body: bytes,
    timestamp: str | None,
    signature: str | None,
    tolerance_s: int = TOLERANCE_S,
    now: float | None = None,
) -> int:
    """Check a received webhook; returns its timestamp, raises InvalidSignature.

    `signature` may hold several comma-separated `v1=` values (one per secret
    while a secret is rotated); any one matching is enough.
    """
    if not timestamp or not signature:
        raise InvalidSignature("missing timestamp or signature header")
    try:
        ts = int(timestamp)
    except ValueError:
        raise InvalidSignature("the timestamp is not an integer") from None
    current = time.time() if now is None else now
    if abs(current - ts) > tolerance_s:
        raise InvalidSignature("the timestamp is too far from now (a replay?)")
    expected = sign(secret, ts, body)
    candidates = [part.strip() for part in signature.split(",")]
    if not any(hmac.compare_digest(expected, c) for c in candidates):
        raise InvalidSignature("the signature does not match")
    return ts


def verify_headers(
    secret: str, body: bytes, headers: Mapping[str, str], **kwargs: float
) -> int:
    """`verify()` reading both headers from a mapping (case-insensitively)."""
    lower = {k.lower(): v for k, v in headers.items()}
    return verify(
        secret,
        body,
        lower.get(TIMESTAMP_HEADER.lower()),
        lower.get(SIGNATURE_HEADER.lower()),
        **kwargs,  # type: ignore[arg-type]
    )
