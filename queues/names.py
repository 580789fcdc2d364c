"""Names in one place: what a queue may be called, and its qualified name.

Two rules, because two audiences name queues:

- `check_queue_name` is the protocol's rule (docs/protocol.md §1): any
  non-empty name without `:`, since a colon would break key parsing. Queues
  made by Node BullMQ may use anything else, and Bullpen must still work them.
- `is_safe_queue_name` is the rule for names Bullpen *accepts from people and
  config* (the HTTP API, GPU worker config, dashboard links): 1-100 letters,
  digits, `_`, `.` or `-`, not starting with `.` or `-`. Such a name needs no
  escaping in a URL, a log line, a shell or a Prometheus label.
"""

from __future__ import annotations

import re
from typing import Any

QUEUE_NAME_ERROR = "queue name must be a non-empty string without ':'"

#: The safe rule as a JSON-schema / regex pattern (the API's OpenAPI uses it).
SAFE_QUEUE_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$"
SAFE_QUEUE_NAME_RE = re.compile(SAFE_QUEUE_NAME_PATTERN)
SAFE_QUEUE_NAME_RULE = (
    "1-100 letters, digits, '_', '.' or '-', not starting with '.' or '-'"
)


def check_queue_name(name: str) -> str:
    """`name` if it is a queue name the protocol allows, else ValueError."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"{QUEUE_NAME_ERROR}: {name!r}")
    return name


def is_safe_queue_name(name: Any) -> bool:
    """Whether `name` follows the safe rule (see the module docstring)."""
    return isinstance(name, str) and SAFE_QUEUE_NAME_RE.fullmatch(name) is not None


def qualified_name(prefix: str, name: str) -> str:
    """`prefix:name`: how a queue is told apart from same-named queues of
    other prefixes (the base of its keys, minus the trailing colon)."""
    return f"{prefix}:{name}"


def split_qualified_name(value: str) -> tuple[str, str]:
    """`(prefix, name)` of a qualified name; the name is after the last colon
    (prefixes may hold colons, names may not). ValueError if there is none."""
    prefix, colon, name = value.rpartition(":")
    if not colon or not prefix:
        raise ValueError(f"not a qualified queue name: {value!r}")
    return prefix, check_queue_name(name)


#: A group id (docs/groups.md): part of key names, so never a `:`.
GROUP_ID_PATTERN = r"^[A-Za-z0-9_.@+\-/]{1,100}$"
GROUP_ID_RE = re.compile(GROUP_ID_PATTERN)
GROUP_ID_RULE = "1-100 letters, digits, '_', '.', '@', '+', '-' or '/'"


def is_group_id(group: Any) -> bool:
    """Whether `group` is a valid group id."""
    return isinstance(group, str) and bool(GROUP_ID_RE.fullmatch(group))
