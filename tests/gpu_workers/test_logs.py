"""The JSON log formatter: one JSON object per line, traceback under `exc`."""

from __future__ import annotations

import json
import logging
import sys

from gpu_workers.logs import JsonFormatter


def test_a_record_is_one_json_line_with_its_traceback() -> None:
    """time, level, logger and message always; exc when an exception is logged;
    a message with a newline still makes one line."""
    logger = logging.getLogger("tests.json")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logger.makeRecord(
            "tests.json",
            logging.ERROR,
            __file__,
            1,
            "failed:\n%s",
            ("x",),
            exc_info=sys.exc_info(),
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["level"] == "ERROR" and parsed["logger"] == "tests.json"
    assert parsed["message"] == "failed:\nx"
    assert parsed["time"].endswith("+00:00")
    assert "RuntimeError: boom" in parsed["exc"]
