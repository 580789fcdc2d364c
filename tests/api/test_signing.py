"""Webhook signatures: HMAC-SHA256 over timestamp and body, verified in
constant time with a replay window; docs/http-api.md's receiver snippet agrees."""

from __future__ import annotations

import hashlib
import hmac
import re
from pathlib import Path

import pytest

from dashboard.api.exceptions import InvalidSignature
from dashboard.api.webhooks import signing

SECRET = "whsec_test"
BODY = b'{"event":"completed","job_id":"42"}'
NOW = 1_767_225_600


def test_signature_is_hmac_sha256_of_timestamp_dot_body() -> None:
    """v1= hex HMAC-SHA256(secret, f"{timestamp}." + body)."""
    expected = hmac.new(SECRET.encode(), f"{NOW}.".encode() + BODY, hashlib.sha256)
    assert signing.sign(SECRET, NOW, BODY) == "v1=" + expected.hexdigest()
    headers = signing.signature_headers(SECRET, BODY, now=NOW)
    assert headers == {
        "X-Bullpen-Timestamp": str(NOW),
        "X-Bullpen-Signature": signing.sign(SECRET, NOW, BODY),
    }


def test_verify_accepts_a_good_signature() -> None:
    """A fresh, matching signature verifies (also among rotated ones)."""
    sig = signing.sign(SECRET, NOW, BODY)
    assert signing.verify(SECRET, BODY, str(NOW), sig, now=NOW + 10) == NOW
    assert signing.verify(SECRET, BODY, str(NOW), f"v1=00ff, {sig}", now=NOW) == NOW
    headers = {"x-bullpen-timestamp": str(NOW), "X-BULLPEN-SIGNATURE": sig}
    assert signing.verify_headers(SECRET, BODY, headers, now=NOW) == NOW


@pytest.mark.parametrize(
    ("secret", "body", "timestamp", "signature", "reason"),
    [
        ("other", BODY, str(NOW), None, "does not match"),
        (SECRET, BODY + b" ", str(NOW), None, "does not match"),
        (SECRET, BODY, str(NOW + 1), None, "does not match"),
        (SECRET, BODY, str(NOW - 301), "stale", "too far"),
        (SECRET, BODY, "soon", "x", "not an integer"),
        (SECRET, BODY, None, "x", "missing"),
        (SECRET, BODY, str(NOW), "", "missing"),
    ],
    ids=[
        "wrong secret",
        "tampered body",
        "other timestamp",
        "replayed",
        "bad timestamp",
        "no timestamp",
        "no signature",
    ],
)
def test_verify_refuses(
    secret: str, body: bytes, timestamp: str | None, signature: str | None, reason: str
) -> None:
    """Wrong secret, tampered body or timestamp, old timestamps, missing headers."""
    if signature is None:
        signature = signing.sign(SECRET, NOW, BODY)
    elif signature == "stale":
        signature = signing.sign(SECRET, NOW - 301, BODY)
    with pytest.raises(InvalidSignature, match=reason):
        signing.verify(secret, body, timestamp, signature, now=NOW)


def doc_snippet() -> str:
    text = (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text()
    match = re.search(r"<!-- webhook-verify -->\s*```python\n(.*?)```", text, re.S)
    assert match, "docs/http-api.md's webhook verification snippet is missing"
    return match.group(1)


def test_doc_verification_snippet_matches_the_signer() -> None:
    """The copy-paste verifier in docs/http-api.md accepts what Bullpen signs and
    refuses tampering and replays."""
    scope: dict[str, object] = {}
    exec(doc_snippet(), scope)  # noqa: S102 - our own docs
    verify = scope["verify_bullpen_webhook"]
    headers = signing.signature_headers(SECRET, BODY)
    assert (
        verify(
            SECRET,
            BODY,
            headers["X-Bullpen-Timestamp"],  # type: ignore[operator]
            headers["X-Bullpen-Signature"],
        )
        is True
    )
    assert (
        verify(
            SECRET,
            BODY + b"x",
            headers["X-Bullpen-Timestamp"],  # type: ignore[operator]
            headers["X-Bullpen-Signature"],
        )
        is False
    )
    old = signing.signature_headers(SECRET, BODY, now=NOW)
    assert (
        verify(
            SECRET,
            BODY,
            old["X-Bullpen-Timestamp"],  # type: ignore[operator]
            old["X-Bullpen-Signature"],
        )
        is False
    )
