"""Misconfigured dashboard settings are reported as system checks with ids."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.console.checks import check_settings


def _ids() -> list[str]:
    return [e.id for e in check_settings()]


def test_default_settings_pass() -> None:
    """The shipped defaults need no environment."""
    assert _ids() == []


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("REDIS_URL", "localhost:6379", "bullpen.E001"),
        ("REDIS_URL", "redis+sentinel://h:26379", "bullpen.E001"),
        ("REDIS_URL", "redis+cluster://h:70000", "bullpen.E001"),
        ("REDIS_URL", "redis+cluster://h:7000/1", "bullpen.E001"),
        ("BULLPEN_PREFIXES", [], "bullpen.E002"),
        ("BULLPEN_PREFIXES", ["bull", ""], "bullpen.E002"),
        ("BULLPEN_QUEUES", ["bull:"], "bullpen.E003"),
        ("BULLPEN_READ_ONLY_QUEUES", [":"], "bullpen.E004"),
        ("BULLPEN_REDACT", "no.such.module.redact", "bullpen.E005"),
        ("BULLPEN_REDACT", "dashboard.shared.redaction.REDACTED", "bullpen.E005"),
        ("BULLPEN_PAGE_SIZE", 0, "bullpen.E006"),
        ("BULLPEN_SCAN_CAP", 10_000_000, "bullpen.E006"),
        ("BULLPEN_DISCOVERY_TTL_S", -1, "bullpen.E006"),
        ("BULLPEN_LOGIN_MAX_FAILURES", 0, "bullpen.E006"),
        ("BULLPEN_LOGIN_LOCKOUT_S", 0, "bullpen.E006"),
        ("BULLPEN_TRUSTED_PROXY_COUNT", -1, "bullpen.E006"),
        ("BULLPEN_TRUSTED_PROXY_COUNT", 11, "bullpen.E006"),
        ("BULLPEN_LOG_FORMAT", "xml", "bullpen.E008"),
    ],
)
def test_each_misconfiguration_has_its_id(
    settings: Any, name: str, value: Any, error: str
) -> None:
    """Each bad value is reported once, under its id."""
    setattr(settings, name, value)
    assert _ids() == [error]


def test_good_non_default_values_pass(settings: Any) -> None:
    """Queue entries with prefixes, `*` and a real hook are accepted."""
    settings.BULLPEN_QUEUES = ["render", "{bull}:embed"]
    settings.BULLPEN_READ_ONLY_QUEUES = ["*", "bull:render"]
    settings.BULLPEN_REDACT = "dashboard.shared.redaction.redact_sensitive_keys"
    settings.REDIS_URL = "unix:///tmp/redis.sock"
    assert _ids() == []
    settings.REDIS_URL = "redis+sentinel://:pw@h1:26379,h2:26379/mymaster/0"
    assert _ids() == []
    settings.BULLPEN_QUEUES = ["{render}", "{bull}:embed"]
    settings.REDIS_URL = "redis+cluster://:pw@h1:7000,h2:7001"
    assert _ids() == []
    settings.REDIS_URL = "rediss+cluster://h1"
    assert _ids() == []


def test_a_bad_cluster_url_is_one_clear_line(settings: Any) -> None:
    """A malformed redis+cluster:// URL says what is wrong in one line,
    without the password."""
    settings.REDIS_URL = "redis+cluster://:secret@h1:7000,h2:notaport"
    (error,) = check_settings()
    assert error.id == "bullpen.E001"
    assert "\n" not in error.msg and "secret" not in error.msg
    assert "h2:notaport" in error.msg and "port" in error.msg


def test_a_queue_without_a_hash_tag_is_refused_on_a_cluster(settings: Any) -> None:
    """On a Redis Cluster, each BULLPEN_QUEUES entry needs a hash tag."""
    settings.REDIS_URL = "redis+cluster://h1:7000"
    settings.BULLPEN_QUEUES = ["{render}", "{bull}:embed", "plain", "bull:other"]
    errors = check_settings()
    assert [e.id for e in errors] == ["bullpen.E007", "bullpen.E007"]
    assert "'plain'" in errors[0].msg and "'bull:other'" in errors[1].msg
    settings.REDIS_URL = "redis://h1:6379/0"
    assert _ids() == []


def test_the_api_prefix_needs_a_hash_tag_on_a_cluster(settings: Any) -> None:
    """API queue names have no braces, so on a cluster the API's prefix
    carries the tag (the webhook dispatcher's queue lives under it too)."""
    from dashboard.api.checks import check_api_settings

    def api_ids() -> list[str]:
        return [m.id for m in check_api_settings() if m.id.startswith("bullpen.E")]

    settings.REDIS_URL = "redis+cluster://h1:7000"
    settings.BULLPEN_API_PREFIX = "bull"
    assert api_ids() == ["bullpen.E104"]
    settings.BULLPEN_API_PREFIX = "{bull}"
    assert api_ids() == []
    settings.BULLPEN_API_PREFIX = "bull"
    settings.REDIS_URL = "redis://h1:6379/0"
    assert api_ids() == []
