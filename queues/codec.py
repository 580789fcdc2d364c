"""JSON as BullMQ writes it (compact, like JSON.stringify) and reading job
hashes written by any client."""

from __future__ import annotations

from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError


def dumps(value: Any) -> str:
    """Compact JSON text, as Node's JSON.stringify writes it."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def loads(text: str | bytes) -> Any:
    """Parse JSON text."""
    return orjson.loads(text)


def to_int(value: str | None, default: int | None = None) -> int | None:
    """An integer field; tolerates floats written by other clients."""
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        try:
            return int(float(value))
        except ValueError:
            return default


def pairs_to_dict(flat: list[Any]) -> dict[str, str]:
    """A flat [field, value, ...] array (HGETALL inside Lua) as a dict."""
    it = iter(flat)
    return dict(zip(it, it))
