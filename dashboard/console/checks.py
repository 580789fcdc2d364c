"""System checks for the dashboard's settings (`manage.py check`).

bullpen.E001  REDIS_URL is not a well-formed redis://, rediss://, unix://,
              redis+sentinel:// or redis+cluster:// URL
bullpen.E002  the key prefixes setting is empty or holds an empty prefix
bullpen.E003  an entry of the queues setting is not `name` or `prefix:name`
bullpen.E004  a read-only queues entry is not `*`, `name` or `prefix:name`
bullpen.E005  the redaction setting does not name an importable callable
bullpen.E006  a size, cap or period setting is out of range
bullpen.E007  on a Redis Cluster REDIS_URL, an entry of the queues setting has
              no hash tag
bullpen.E008  the log format is neither `text` nor `json`
bullpen.E009  DATABASE_URL is not a postgres://, postgresql:// or sqlite:/// URL
              Django can use (its password is never shown)

Messages name each setting through gpu_workers/settings.py's table (`named`).

The checks of a host project that mounts the dashboard (bullpen.E010-E012,
bullpen.E013, bullpen.W001) are in dashboard/console/mount_checks.py.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register
from django.utils.module_loading import import_string

from dashboard.shared.conf import DEFAULTS, named
from gpu_workers.logs import LOG_FORMATS
from queues.cluster import hash_tag, is_cluster_url, parse_cluster_url
from queues.sentinel import is_sentinel_url, parse_sentinel_url


def _redis_url_error(url: str) -> str | None:
    """What is wrong with REDIS_URL, else None."""
    if is_sentinel_url(url):
        try:
            parse_sentinel_url(url)
        except ValueError as exc:
            return str(exc)
        return None
    if is_cluster_url(url):
        try:
            parse_cluster_url(url)
        except ValueError as exc:
            return str(exc)
        return None
    if not url.startswith(("redis://", "rediss://", "unix://")):
        schemes = "redis://, rediss://, unix://, redis+sentinel:// or redis+cluster://"
        return f"REDIS_URL {url!r} is not a {schemes} URL"
    return None


def _setting(attr: str) -> Any:
    """The setting of the conf field `attr` as Django's settings hold it (not
    converted: these checks say what is wrong with it), else its default."""
    default = getattr(DEFAULTS, attr)
    return getattr(
        settings, named(attr), list(default) if isinstance(default, tuple) else default
    )


def _queue_entry_ok(entry: str) -> bool:
    name = entry.rsplit(":", 1)[-1]
    prefix = entry.rsplit(":", 1)[0] if ":" in entry else "x"
    return bool(name.strip()) and bool(prefix) and name == name.strip()


def _slotless_queues(prefixes: list[str]) -> list[Error]:
    """Queues-setting entries whose keys would spread over a cluster's slots."""
    errors = []
    for entry in _setting("queues"):
        if not _queue_entry_ok(entry):
            continue  # bullpen.E003
        prefix, _, name = entry.rpartition(":")
        prefix = prefix or (prefixes[0] if prefixes else "bull")
        if hash_tag(f"{prefix}:{name}:") is None:
            errors.append(
                Error(
                    f"{named('queues')} entry {entry!r} has no hash tag: on a Redis "
                    "Cluster its keys would land in different slots",
                    hint="Name it {name} (one slot per queue) or use prefix {bull}",
                    id="bullpen.E007",
                )
            )
    return errors


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Every dashboard setting is usable."""
    errors: list[Error] = []
    url = str(getattr(settings, "REDIS_URL", ""))
    url_error = _redis_url_error(url)
    if url_error is not None:
        errors.append(
            Error(
                url_error,
                hint="Set REDIS_URL, e.g. redis://127.0.0.1:6379/0",
                id="bullpen.E001",
            )
        )
    db_error = getattr(settings, "BULLPEN_DATABASE_URL_ERROR", "")
    if db_error:
        errors.append(
            Error(
                db_error,
                hint="e.g. postgres://bullpen@db.example:5432/bullpen, or unset "
                f"for SQLite at {named('db_path')}",
                id="bullpen.E009",
            )
        )
    prefixes = _setting("prefixes")
    if not prefixes or not all(prefixes):
        errors.append(
            Error(
                f"{named('prefixes')} must list at least one non-empty key prefix",
                hint=f"{named('prefixes')}=bull",
                id="bullpen.E002",
            )
        )
    for entry in _setting("queues"):
        if not _queue_entry_ok(entry):
            errors.append(
                Error(
                    f"{named('queues')} entry {entry!r} is not `name` or `prefix:name`",
                    id="bullpen.E003",
                )
            )
    for entry in _setting("read_only_queues"):
        if entry != "*" and not _queue_entry_ok(entry):
            errors.append(
                Error(
                    f"{named('read_only_queues')} entry {entry!r} is not `*`, "
                    "`name` or `prefix:name`",
                    id="bullpen.E004",
                )
            )
    if url_error is None and is_cluster_url(url):
        errors.extend(_slotless_queues(prefixes))
    redact = _setting("redact")
    redact_name = named("redact")
    if redact:
        try:
            hook = import_string(redact)
        except ImportError as exc:
            errors.append(
                Error(
                    f"{redact_name} {redact!r} cannot be imported: {exc}",
                    id="bullpen.E005",
                )
            )
        else:
            if not callable(hook):
                errors.append(
                    Error(
                        f"{redact_name} {redact!r} is not callable", id="bullpen.E005"
                    )
                )
    for attr, low, high in (
        ("data_preview_chars", 10, 100_000),
        ("data_detail_chars", 100, 100_000_000),
        ("page_size", 1, 500),
        ("scan_cap", 10, 100_000),
        ("discovery_ttl_s", 0, 86_400),
        ("sparkline_minutes", 2, 1_440),
        ("login_max_failures", 1, 1_000),
        ("login_lockout_s", 1, 7 * 86_400),
        ("trusted_proxy_count", 0, 10),
    ):
        value = _setting(attr)
        if not isinstance(value, (int, float)) or not low <= value <= high:
            errors.append(
                Error(
                    f"{named(attr)} is {value!r}; expected {low}..{high}",
                    id="bullpen.E006",
                )
            )
    log_format = _setting("log_format")
    if log_format not in LOG_FORMATS:
        errors.append(
            Error(
                f"{named('log_format')} is {log_format!r}; expected text or json",
                id="bullpen.E008",
            )
        )
    return errors
