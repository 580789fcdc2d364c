"""`python -m gpu_workers`: a supervisor without Django (bench/gpu_check.py
and tests use it; `manage.py runworkers` is the settings-driven entry).

    python -m gpu_workers --redis-url redis://127.0.0.1:6379/0 \\
        --gpus sim:2x24GiB --workers 'txt2img:3,video:1' --host node-a
    python -m gpu_workers --config '{"redis_url": ..., "queues": [...], ...}'
    python -m gpu_workers --config - < config.json

A Redis URL with a password belongs in --config - (stdin) or @file: a
command line is readable by anyone on the host (ps).

    python -m gpu_workers --liveness-file /run/bullpen/supervisor.alive ...
    python -m gpu_workers check-alive --max-age 30 \\
        --liveness-file /run/bullpen/supervisor.alive      # exit 0 or 1
    python -m gpu_workers drain --timeout 80 \\
        --liveness-file /run/bullpen/supervisor.alive      # SIGTERM, wait

REDIS_URL and the variables of the GPU part of gpu_workers/settings.py's
table (docs/configuration.md's GPU worker section, the log format and the
liveness file) fill what flags and --config leave unset
(gpu_workers/envconfig.py), so the GPU image needs no flags:

    REDIS_URL=redis://... python -m gpu_workers    # works queue gpu, 3 slots
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from . import logs
from .config import SupervisorConfig, parse_workers
from .drain import drain
from .envconfig import env_values
from .exceptions import ConfigError
from .liveness import LIVENESS_MAX_AGE_S, check_alive
from .settings import default, named
from .supervisor import run_supervisor


def build_config(
    args: argparse.Namespace, environ: Mapping[str, str] = os.environ
) -> SupervisorConfig:
    """Flags first, then --config JSON (any SupervisorConfig field) over them,
    then the environment (gpu_workers/envconfig.py) for what neither sets."""
    data: dict[str, Any] = {}
    if args.config:
        text = args.config
        if text == "-":
            text = sys.stdin.read()
        elif text.startswith("@"):
            with open(text[1:]) as f:
                text = f.read()
        data = json.loads(text)
    for name in ("redis_url", "host", "gpus", "log_dir", "log_format", "liveness_file"):
        value = getattr(args, name)
        if value is not None:
            data.setdefault(name, value)
    if args.handler_modules:
        data.setdefault(
            "handler_modules", [m for m in args.handler_modules.split(",") if m]
        )
    if args.workers:
        data.setdefault("queues", args.workers)
    for field, value in env_values(environ).items():
        data.setdefault(field, value)
    data["queues"] = parse_workers(data.get("queues", default("workers")))
    if "redis_url" not in data:
        raise ConfigError(
            "--redis-url (or redis_url in --config, or REDIS_URL) is required"
        )
    return SupervisorConfig(**data)


def _liveness_parser(command: str) -> argparse.ArgumentParser:
    """The parser of a subcommand that finds the supervisor by its liveness
    file (--liveness-file, default: the liveness-file variable)."""
    parser = argparse.ArgumentParser(prog=f"python -m gpu_workers {command}")
    parser.add_argument(
        "--liveness-file", default=os.environ.get(named("liveness_file"))
    )
    return parser


def check_alive_main(argv: list[str]) -> int:
    """`check-alive`: 0 when the supervisor's liveness file is fresh, else 1."""
    parser = _liveness_parser("check-alive")
    parser.add_argument(
        "--max-age", type=float, default=LIVENESS_MAX_AGE_S, help="seconds"
    )
    args = parser.parse_args(argv)
    return check_alive(args.liveness_file, args.max_age)


def drain_main(argv: list[str]) -> int:
    """`drain`: SIGTERM the supervisor named by its liveness file, wait it out."""
    parser = _liveness_parser("drain")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the drain"
    )
    args = parser.parse_args(argv)
    return drain(args.liveness_file, args.timeout)


def main(argv: list[str] | None = None) -> int:
    """Parse flags and run a supervisor until SIGTERM/SIGINT."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["check-alive"]:
        return check_alive_main(argv[1:])
    if argv[:1] == ["drain"]:
        return drain_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m gpu_workers")
    parser.add_argument("--redis-url")
    parser.add_argument("--host", help="host name (default: this machine's)")
    parser.add_argument("--gpus", help="auto | nvml | none | sim:2x24GiB")
    parser.add_argument("--workers", help="queue:slots,... or a JSON list")
    parser.add_argument("--handler-modules", help="comma-separated modules")
    parser.add_argument("--log-dir")
    parser.add_argument("--log-format", choices=logs.LOG_FORMATS)
    parser.add_argument(
        "--liveness-file",
        help="rewritten every few seconds while the supervisor runs",
    )
    parser.add_argument(
        "--config", help="JSON (@file, or - for stdin) of SupervisorConfig fields"
    )
    args = parser.parse_args(argv)
    try:
        config = build_config(args)
    except (ConfigError, ValueError, TypeError) as exc:
        parser.error(str(exc))
    logs.configure(
        config.log_level,
        config.log_format,
        "%(asctime)s %(levelname)s [supervisor %(process)d] %(name)s: %(message)s",
    )
    return run_supervisor(config)


if __name__ == "__main__":
    sys.exit(main())
