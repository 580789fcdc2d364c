"""Byte sizes as people write them: "10GiB", "512 MiB", "1.5GB", 1024."""

from __future__ import annotations

import re

from .exceptions import UnitError

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "ki": 1 << 10,
    "kib": 1 << 10,
    "mi": 1 << 20,
    "mib": 1 << 20,
    "gi": 1 << 30,
    "gib": 1 << 30,
    "ti": 1 << 40,
    "tib": 1 << 40,
}
_PATTERN = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_bytes(value: int | float | str) -> int:
    """A non-negative byte count from an int or a string with an optional unit.

    Units are case-insensitive: B; k/KB, M/MB, G/GB, T/TB (powers of 1000);
    Ki/KiB, Mi/MiB, Gi/GiB, Ti/TiB (powers of 1024).
    """
    if isinstance(value, bool):
        raise UnitError(f"not a byte size: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0 or value != value:
            raise UnitError(f"byte size must be >= 0, not {value!r}")
        return int(value)
    if not isinstance(value, str):
        raise UnitError(f"not a byte size: {value!r}")
    match = _PATTERN.match(value)
    if not match:
        raise UnitError(f"not a byte size: {value!r} (examples: 10GiB, 512MiB, 1.5GB)")
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise UnitError(
            f"unknown unit {unit!r} in {value!r}; use B, KiB, MiB, GiB, "
            "TiB or KB, MB, GB, TB"
        )
    return int(float(number) * factor)


def format_bytes(n: int | float) -> str:
    """A short human form in binary units: 10.0 GiB, 512.0 MiB, 12 B."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
