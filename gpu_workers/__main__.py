"""`python -m gpu_workers`: a supervisor without Django (bench/gpu_check.py
and tests use it; `manage.py runworkers` is the settings-driven entry).

    python -m gpu_workers --redis-url redis://127.0.0.1:6379/0 \\
        --gpus sim:2x24GiB --workers 'txt2img:3,video:1' --host node-a
    python -m gpu_workers --config '{"redis_url": ..., "queues": [...], ...}'
    python -m gpu_workers --config - < config.json

A Redis URL with a password belongs in --config - (stdin) or @file: a
command line is readable by anyone on the host (ps).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from .config import SupervisorConfig, parse_workers
from .exceptions import ConfigError
from .supervisor import run_supervisor


def build_config(args: argparse.Namespace) -> SupervisorConfig:
    """Flags first, then --config JSON (any SupervisorConfig field) over them."""
    data: dict[str, Any] = {}
    if args.config:
        text = args.config
        if text == "-":
            text = sys.stdin.read()
        elif text.startswith("@"):
            with open(text[1:]) as f:
                text = f.read()
        data = json.loads(text)
    for name in ("redis_url", "host", "gpus", "log_dir"):
        value = getattr(args, name)
        if value is not None:
            data.setdefault(name, value)
    if args.handler_modules:
        data.setdefault(
            "handler_modules", [m for m in args.handler_modules.split(",") if m]
        )
    data["queues"] = parse_workers(data.get("queues", args.workers or "gpu:3"))
    if "redis_url" not in data:
        raise ConfigError("--redis-url (or redis_url in --config) is required")
    return SupervisorConfig(**data)


def main(argv: list[str] | None = None) -> int:
    """Parse flags and run a supervisor until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m gpu_workers")
    parser.add_argument("--redis-url")
    parser.add_argument("--host", help="host name (default: this machine's)")
    parser.add_argument("--gpus", help="auto | nvml | none | sim:2x24GiB")
    parser.add_argument("--workers", help="queue:slots,... or a JSON list")
    parser.add_argument("--handler-modules", help="comma-separated modules")
    parser.add_argument("--log-dir")
    parser.add_argument(
        "--config", help="JSON (@file, or - for stdin) of SupervisorConfig fields"
    )
    args = parser.parse_args(argv)
    try:
        config = build_config(args)
    except (ConfigError, ValueError, TypeError) as exc:
        parser.error(str(exc))
    logging.basicConfig(
        level=config.log_level,
        format="%(asctime)s %(levelname)s [supervisor %(process)d] "
        "%(name)s: %(message)s",
    )
    return run_supervisor(config)


if __name__ == "__main__":
    sys.exit(main())
