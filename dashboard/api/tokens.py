"""API token strings: generated once, shown once, stored only as a hash.

A token reads `bp_<8 lowercase letters or digits>_<43 url-safe characters>`:
the first part (`bp_xxxxxxxx`) is its public prefix, shown in the admin and
in lists; the rest is 256 random bits. Tokens are random, not passwords, so a
plain SHA-256 is the right hash (as GitHub and Stripe do): nothing to slow a
guesser down against 2**256.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import string

TOKEN_RE = re.compile(r"^bp_[a-z0-9]{8}_[A-Za-z0-9_-]{43}$")
_ALPHABET = string.ascii_lowercase + string.digits


def generate() -> tuple[str, str]:
    """A new token and its public prefix."""
    prefix = "bp_" + "".join(secrets.choice(_ALPHABET) for _ in range(8))
    return f"{prefix}_{secrets.token_urlsafe(32)}", prefix


def hash_token(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def looks_like_token(value: str) -> bool:
    """Whether a string has a token's shape (checked before any lookup)."""
    return bool(TOKEN_RE.fullmatch(value))


def generate_secret() -> str:
    """A webhook signing secret."""
    return "whsec_" + secrets.token_urlsafe(32)
