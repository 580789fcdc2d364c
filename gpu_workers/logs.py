"""Log output for Bullpen's processes: the usual text lines, or one JSON
object per line (BULLPEN_LOG_FORMAT=json) for log collectors. The dashboard
(LOGGING in dashboard/settings.py), the supervisor, its worker processes
and the webhook dispatcher all use the same formatter."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

#: The values BULLPEN_LOG_FORMAT and --log-format take.
LOG_FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger,
    message, and exc (the formatted traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level: str | int, log_format: str, text_format: str) -> None:
    """The root logger's one handler (stderr), as basicConfig would set it:
    `text_format` lines, or JSON ones when `log_format` is "json"."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, not {log_format!r}")
    formatter = (
        JsonFormatter() if log_format == "json" else logging.Formatter(text_format)
    )
    handler = logging.StreamHandler()
    handler.setFormatter(formatter)
    logging.basicConfig(level=level, handlers=[handler])
