"""`manage.py runworkers`: the GPU worker supervisor of this host.

Only reads settings and hands them to gpu_workers (which never imports
Django, so worker processes start fast); SIGTERM or Ctrl-C drains.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from gpu_workers import SupervisorConfig, parse_workers
from gpu_workers.exceptions import ConfigError
from gpu_workers.supervisor import run_supervisor


def config_from_settings(**overrides: Any) -> SupervisorConfig:
    """A SupervisorConfig from the BULLPEN_* settings (overrides win)."""
    values: dict[str, Any] = {
        "redis_url": settings.REDIS_URL,
        "host": settings.BULLPEN_HOSTNAME,
        "gpus": settings.BULLPEN_GPUS,
        "queues": parse_workers(settings.BULLPEN_WORKERS),
        "handler_modules": list(settings.BULLPEN_HANDLER_MODULES),
        "namespace": settings.BULLPEN_NAMESPACE,
        "reserve_bytes": settings.BULLPEN_VRAM_RESERVE,
        "context_bytes": settings.BULLPEN_VRAM_CUDA_CONTEXT,
        "margin_bytes": settings.BULLPEN_VRAM_MARGIN,
        "max_restarts": settings.BULLPEN_MAX_RESTARTS,
        "restart_window_s": settings.BULLPEN_RESTART_WINDOW_S,
        "drain_timeout_s": settings.BULLPEN_DRAIN_TIMEOUT_S,
        "heartbeat_interval_s": settings.BULLPEN_HEARTBEAT_INTERVAL_S,
        "heartbeat_ttl_s": settings.BULLPEN_HEARTBEAT_TTL_S,
        "metrics_data_points": settings.BULLPEN_METRICS_DATA_POINTS,
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return SupervisorConfig(**values)


class Command(BaseCommand):
    help = "Run this host's GPU worker supervisor (SIGTERM drains)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--gpus", help="override BULLPEN_GPUS (e.g. sim:2x24GiB)")
        parser.add_argument("--host", help="override BULLPEN_HOSTNAME")
        parser.add_argument(
            "--check",
            action="store_true",
            help="validate the settings, print the plan and exit",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config = config_from_settings(
                gpus=options.get("gpus"), host=options.get("host")
            )
        except ConfigError as exc:
            raise CommandError(f"bad GPU worker settings: {exc}") from exc
        if options.get("check"):
            self.stdout.write(
                f"host {config.host}, GPUs {config.gpus}, queues "
                + ", ".join(f"{q.key} ({q.slots} slots)" for q in config.queues)
            )
            return
        code = run_supervisor(config)
        if code:
            raise CommandError(f"supervisor exited with status {code}")
