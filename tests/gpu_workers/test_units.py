"""Byte sizes and configuration parsing."""

from __future__ import annotations

import pytest

from gpu_workers.config import QueueConfig, SupervisorConfig, parse_workers
from gpu_workers.exceptions import ConfigError, UnitError
from gpu_workers.units import format_bytes, parse_bytes


@pytest.mark.parametrize(
    "text, expected",
    [
        ("10GiB", 10 * 2**30),
        ("512 MiB", 512 * 2**20),
        ("1.5GB", 1_500_000_000),
        ("24gib", 24 * 2**30),
        ("2Ti", 2 * 2**40),
        ("1024", 1024),
        (4096, 4096),
        ("0", 0),
        ("3k", 3000),
        (".5GiB", 2**29),
    ],
)
def test_parse_bytes(text: object, expected: int) -> None:
    """Binary and decimal units, case-insensitive, with or without a space."""
    assert parse_bytes(text) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad", ["", "GiB", "-1GiB", "10 parsecs", "1e3", -5, True, None]
)
def test_parse_bytes_rejects(bad: object) -> None:
    """Anything else is a UnitError (a ConfigError and a ValueError)."""
    with pytest.raises(UnitError):
        parse_bytes(bad)  # type: ignore[arg-type]
    assert issubclass(UnitError, ValueError)


def test_format_bytes() -> None:
    """Binary units with one decimal."""
    assert format_bytes(10 * 2**30) == "10.0 GiB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536 * 2**20) == "1.5 GiB"
    assert format_bytes(3 * 2**40) == "3.0 TiB"


def test_parse_workers_short_and_json() -> None:
    """`queue:slots,...` or a JSON list of QueueConfig fields."""
    short = parse_workers("txt2img:3,video:1,embed")
    assert [(q.queue, q.slots) for q in short] == [
        ("txt2img", 3),
        ("video", 1),
        ("embed", 3),
    ]
    full = parse_workers(
        '[{"queue": "txt2img", "slots": 2, "gpus": [0], "vram_share": 0.5}]'
    )
    assert full[0].gpus == [0] and full[0].vram_share == 0.5
    with pytest.raises(ConfigError):
        parse_workers('[{"queue": "x", "bogus": 1}]')
    with pytest.raises(ConfigError):
        parse_workers("bad:queue:name")
    with pytest.raises(ConfigError):
        QueueConfig("q", slots=0)


def test_supervisor_config_validates() -> None:
    """Host names, namespace vs queue prefixes, units and heartbeat TTL."""
    ok = SupervisorConfig(
        "redis://x", [QueueConfig("q")], host="h1", reserve_bytes="2GiB"
    )  # type: ignore[arg-type]
    assert ok.reserve_bytes == 2 * 2**30
    with pytest.raises(ConfigError):
        SupervisorConfig("redis://x", [QueueConfig("q")], host="a:b")
    with pytest.raises(ConfigError, match="namespace"):
        SupervisorConfig("redis://x", [QueueConfig("q", prefix="bullpen")], host="h")
    with pytest.raises(ConfigError):
        SupervisorConfig(
            "redis://x",
            [QueueConfig("q")],
            host="h",
            heartbeat_interval_s=2,
            heartbeat_ttl_s=1,
        )
