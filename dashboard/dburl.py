"""`DATABASE_URL` to a Django `DATABASES["default"]` entry, strictly.

    postgres://user:password@host:port/name?sslmode=require&connect_timeout=5
    postgresql://...                     (the same)
    sqlite:///relative/path.sqlite3      (relative to `base`, the project)
    sqlite:////absolute/path.sqlite3

dj-database-url parses PostgreSQL URLs (user and password unquoted, IPv6
hosts, the port, the engine, CONN_MAX_AGE and CONN_HEALTH_CHECKS); this
module refuses what the library lets through, and reads SQLite URLs itself
(the library's rules for them are not these). Anything else (another scheme, a missing
database name, a bad port, an unknown query parameter) raises ValueError
whose message shows the URL with its password replaced by `***`: the message
goes to logs and terminals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import dj_database_url

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
        db = dj_database_url.parse(
            url, conn_max_age=conn_max_age, conn_health_checks=True
        )
    except dj_database_url.ParseError:
        # urlsplit's errors, which the library hides: they may quote the password.
        raise ValueError(f"DATABASE_URL {shown!r}: bad host or port") from None
    parts = urlsplit(url)
    if parts.fragment:
        raise ValueError(f"DATABASE_URL {shown!r}: a fragment (#...) is not allowed")
    if not db["NAME"] or "/" in db["NAME"]:
        raise ValueError(
            f"DATABASE_URL {shown!r} names no database: postgres://user@host:5432/name"
        )
    # Where the library differs: it adds DISABLE_SERVER_SIDE_CURSORS (Django's
    # default), reads port 0 as none, and its OPTIONS drop blank values, turn
    # "123" and "true" into 123 and True, and take any parameter.
    db.pop("DISABLE_SERVER_SIDE_CURSORS", None)
    port = "" if parts.port is None else str(parts.port)
    return {**db, "PORT": port, "OPTIONS": _options(parts.query, shown)}


def _options(query: str, shown: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
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
    return options


def _sqlite(url: str, shown: str, base: Path) -> dict[str, Any]:
    # Not the library's: it reads sqlite:// and sqlite:/// as an in-memory
    # database, passes a host or parameters through, and drops tabs and
    # newlines from the path.
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
