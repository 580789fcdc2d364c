"""`DATABASE_URL` to a Django `DATABASES["default"]` entry, strictly.

    postgres://user:password@host:port/name?sslmode=require&connect_timeout=5
    postgresql://...                     (the same)
    sqlite:///relative/path.sqlite3      (relative to `base`, the project)
    sqlite:////absolute/path.sqlite3

Anything else (another scheme, a missing database name, a bad port, an
unknown query parameter) raises ValueError whose message shows the URL with
its password replaced by `***`: the message goes to logs and terminals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

POSTGRES_SCHEMES = ("postgres", "postgresql")
#: libpq's sslmode values.
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def redact(url: str) -> str:
    """`url` with the password of its user info replaced by `***`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority_end = min(
        (i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest)
    )
    authority, tail = rest[:authority_end], rest[authority_end:]
    userinfo, at, host = authority.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}{tail}"


def parse_database_url(url: str, base: Path, conn_max_age: int = 60) -> dict[str, Any]:
    """The `DATABASES["default"]` entry `url` names (raises ValueError)."""
    shown = redact(url)
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in POSTGRES_SCHEMES:
        return _postgres(url, shown, conn_max_age)
    if scheme == "sqlite":
        return _sqlite(url, shown, base)
    raise ValueError(
        f"DATABASE_URL {shown!r} is not a postgres://, postgresql:// or sqlite:/// URL"
    )


def _postgres(url: str, shown: str, conn_max_age: int) -> dict[str, Any]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        # urlsplit's messages may quote the netloc (password included).
        raise ValueError(f"DATABASE_URL {shown!r}: bad host or port") from None
    if parts.fragment:
        raise ValueError(f"DATABASE_URL {shown!r}: a fragment (#...) is not allowed")
    name = unquote(parts.path[1:]) if parts.path.startswith("/") else ""
    if not name or "/" in name:
        raise ValueError(
            f"DATABASE_URL {shown!r} names no database: postgres://user@host:5432/name"
        )
    options: dict[str, Any] = {}
    for key, value in parse_qsl(
        parts.query, keep_blank_values=True, strict_parsing=False
    ):
        if key in options:
            raise ValueError(f"DATABASE_URL {shown!r}: {key} given twice")
        if key == "sslmode":
            if value not in SSLMODES:
                raise ValueError(
                    f"DATABASE_URL {shown!r}: sslmode {value!r} is not one of "
                    + ", ".join(SSLMODES)
                )
            options[key] = value
        elif key == "connect_timeout":
            if not value.isdigit() or int(value) > 3600:
                raise ValueError(
                    f"DATABASE_URL {shown!r}: connect_timeout {value!r} is not "
                    "a whole number of seconds (0..3600)"
                )
            options[key] = int(value)
        elif key == "application_name":
            options[key] = value
        else:
            raise ValueError(
                f"DATABASE_URL {shown!r}: unknown parameter {key!r} (known: "
                "sslmode, connect_timeout, application_name)"
            )
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": unquote(parts.hostname or ""),
        "PORT": str(port) if port is not None else "",
        "OPTIONS": options,
        "CONN_MAX_AGE": conn_max_age,
        "CONN_HEALTH_CHECKS": True,
    }


def _sqlite(url: str, shown: str, base: Path) -> dict[str, Any]:
    rest = url[len("sqlite://") :]
    if not rest.startswith("/"):
        raise ValueError(
            f"DATABASE_URL {shown!r}: SQLite takes no host: sqlite:///relative/path "
            "or sqlite:////absolute/path"
        )
    if "?" in rest or "#" in rest:
        raise ValueError(f"DATABASE_URL {shown!r}: SQLite takes no parameters")
    path = unquote(rest[1:])
    if not path or path.endswith("/"):
        raise ValueError(f"DATABASE_URL {shown!r} names no SQLite file")
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path if path.startswith("/") else base / path),
    }
