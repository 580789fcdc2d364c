"""JSON as BullMQ writes it (compact, like JSON.stringify) and reading job
hashes written by any client."""

from __future__ import annotations

from typing import Any

try:
    import orjson
except ImportError:  # a bare GPU host may have only redis-py: fall back to json
    orjson = None  # type: ignore[assignment]

if orjson is not None:
    JSONDecodeError: type[ValueError] = orjson.JSONDecodeError

    def dumps(value: Any) -> str:
        """Compact JSON text, as Node's JSON.stringify writes it."""
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()

    def loads(text: str | bytes) -> Any:
        """Parse JSON text."""
        return orjson.loads(text)

else:
    import json

    JSONDecodeError = ValueError

    def dumps(value: Any) -> str:
        """Compact JSON text, as Node's JSON.stringify writes it."""
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )

    def loads(text: str | bytes) -> Any:
        """Parse JSON text."""
        return json.loads(text)


def json_or_text(value: str) -> Any:
    """`value` parsed as JSON, or the text itself when it is not JSON (a
    return value or data written by a client that stores plain strings)."""
    try:
        return loads(value)
    except JSONDecodeError:
        return value


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
