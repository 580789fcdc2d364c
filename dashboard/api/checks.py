"""System checks of the API and webhook settings (`manage.py check`).

bullpen.E101  the webhooks' allowed networks hold something that is not a network
bullpen.E102  an API or webhook size, count or period setting is out of range
bullpen.E103  the API's prefix or the webhook queue is not a usable name
bullpen.E104  on a Redis Cluster REDIS_URL, the API's prefix has no hash tag
bullpen.W101  webhooks may go to private addresses

Messages name each setting through gpu_workers/settings.py's table.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from queues.cluster import hash_tag, is_cluster_url
from queues.names import is_safe_queue_name

from ..shared import conf

_PREFIX_RE = re.compile(r"[A-Za-z0-9_{}.-]{1,100}")


@register()
def check_api_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every API and webhook setting is usable."""
    messages: list[CheckMessage] = []
    try:
        conf.read("webhook_allowed_networks")
    except ValueError as exc:
        messages.append(
            Error(
                f"{conf.setting_name('webhook_allowed_networks')}: {exc}",
                hint="CIDR networks, comma separated, e.g. 10.1.2.0/24",
                id="bullpen.E101",
            )
        )
    ranges = (
        ("max_body_bytes", 1024, 64 << 20),
        ("rate_limit_per_min", 1, 10**7),
        ("sse_max_s", 0.1, 86_400),
        ("webhook_timeout_s", 0.1, 300),
        ("webhook_attempts", 1, 100),
        ("webhook_backoff_ms", 0, 86_400_000),
        ("webhook_progress_interval_ms", 0, 3_600_000),
        ("webhook_concurrency", 1, 1000),
    )
    for name, low, high in ranges:
        try:
            value = conf.read(name)
        except (TypeError, ValueError):
            value = None
        if value is None or not low <= value <= high:
            messages.append(
                Error(
                    f"{conf.setting_name(name)} must be between {low} and {high}",
                    id="bullpen.E102",
                )
            )
    prefix = conf.read("prefix")
    prefix_name = conf.setting_name("prefix")
    if not _PREFIX_RE.fullmatch(prefix):
        messages.append(
            Error(
                f"{prefix_name} {prefix!r} is not a usable key prefix",
                id="bullpen.E103",
            )
        )
    if is_cluster_url(str(conf.read("redis_url"))) and hash_tag(f"{prefix}:") is None:
        messages.append(
            Error(
                f"{prefix_name} {prefix!r} has no hash tag: on a Redis Cluster "
                "the API's queues (names without braces) would spread their keys "
                "over slots, and the webhook dispatcher's queue with them",
                hint=f"Set {prefix_name}={{bull}} (or another {{tag}})",
                id="bullpen.E104",
            )
        )
    webhook_queue = conf.read("webhook_queue")
    if not is_safe_queue_name(webhook_queue):
        messages.append(
            Error(
                f"{conf.setting_name('webhook_queue')} {webhook_queue!r} is not a "
                "queue name",
                id="bullpen.E103",
            )
        )
    if conf.read("webhook_allow_private"):
        messages.append(
            Warning(
                "webhooks may be sent to private, loopback and link-local addresses",
                hint="only for local development; unset "
                + conf.setting_name("webhook_allow_private"),
                id="bullpen.W101",
            )
        )
    return messages
