"""Redaction of job content: the BULLPEN_REDACT hook and what every path that
shows a job (pages, live messages, API, SSE, webhooks) passes job content
through. Part of the shared leaf: it reads its hook from the one conf and
nothing else of the dashboard, so both apps use it."""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from typing import Any

from django.utils.module_loading import import_string

from . import conf

REDACTED = "[redacted]"
#: Keys whose values `redact_sensitive_keys` hides (matched anywhere in the key).
SENSITIVE_KEY = re.compile(
    r"pass(word|wd)?|secret|token|api[-_]?key|auth|cookie|credential|private[-_]?key",
    re.IGNORECASE,
)


def redact_sensitive_keys(value: Any) -> Any:
    """A redaction hook: values under keys that look like secrets become
    "[redacted]", at any depth (set BULLPEN_REDACT to this function's path)."""
    if isinstance(value, dict):
        return {
            k: REDACTED
            if isinstance(k, str) and SENSITIVE_KEY.search(k)
            else redact_sensitive_keys(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_sensitive_keys(v) for v in value]
    return value


@lru_cache(maxsize=4)
def _hook(path: str) -> Any:
    return import_string(path)


def hook_path() -> str:
    """The BULLPEN_REDACT hook's dotted path, "" when none is set (a host
    project need not define the setting)."""
    return conf.get().redact


def redact(value: Any) -> Any:
    """`value` passed through the BULLPEN_REDACT hook (a copy; the hook may
    change what it gets). A failing hook hides everything rather than nothing."""
    path = hook_path()
    if not path:
        return value
    try:
        return _hook(path)(copy.deepcopy(value))
    except Exception:  # noqa: BLE001 - a broken hook must not leak the data
        return REDACTED


def redaction_on() -> bool:
    """Whether a redaction hook is set."""
    return bool(hook_path())


def keep_unchanged(edited: Any, stored: Any) -> Any:
    """`edited` (a form's value that was shown redacted) with every part the
    user left as shown replaced by the stored value at the same key path, at
    any depth: a redacted field saved unchanged keeps its secret, as a
    password field says "unchanged". A marker where `stored` has nothing
    stays as typed. `edited` itself when no hook is set."""
    if not redaction_on():
        return edited
    return _kept(edited, redact(stored), stored)


def _kept(edited: Any, shown: Any, stored: Any) -> Any:
    if edited == shown:
        return stored
    if isinstance(edited, dict) and isinstance(shown, dict):
        if not isinstance(stored, dict):
            return edited
        return {
            k: _kept(v, shown[k], stored[k]) if k in shown and k in stored else v
            for k, v in edited.items()
        }
    if isinstance(edited, list) and isinstance(shown, list):
        if not isinstance(stored, list) or len(stored) != len(shown):
            return edited
        return [
            _kept(v, shown[i], stored[i]) if i < len(shown) else v
            for i, v in enumerate(edited)
        ]
    return edited


#: What a job carries, under the names the job hash, the events stream, the API
#: and webhooks give it: every path that shows one of these (pages, live
#: messages, API, SSE, webhooks) passes it through `redact` first.
CONTENT_FIELDS = frozenset(
    {
        "data",
        "progress",
        "returnvalue",
        "failedReason",
        "failed_reason",
        "stacktrace",
        "logs",
    }
)


def redact_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with the job content in it (`CONTENT_FIELDS`) redacted: a
    copy, or `fields` itself when no hook is set."""
    if not hook_path():
        return fields
    return {k: redact(v) if k in CONTENT_FIELDS else v for k, v in fields.items()}


def redact_text(text: str | None) -> str:
    """A text of a job (failed reason, a log line) as shown: redacted, and
    still a text whatever the hook returns."""
    if not text:
        return ""
    value = redact(text)
    return value if isinstance(value, str) else compact(value)


def redact_lines(lines: list[str] | None) -> list[str]:
    """Lines of a job (logs, stack traces) as shown: redacted, still lines."""
    if not lines:
        return []
    value = redact(list(lines))
    if not isinstance(value, list):
        value = [value]
    return [v if isinstance(v, str) else compact(v) for v in value]


def compact(value: Any) -> str:
    """One-line JSON of any value (non-JSON values as text)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
