"""`manage.py runworkers`: the GPU worker supervisor of this host.

Only reads settings and hands them to gpu_workers (which never imports
Django, so worker processes start fast); SIGTERM or Ctrl-C drains.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.shared import conf
from gpu_workers import SupervisorConfig, parse_workers
from gpu_workers.exceptions import ConfigError
from gpu_workers.supervisor import run_supervisor


def config_from_settings(**overrides: Any) -> SupervisorConfig:
    """A SupervisorConfig from the BULLPEN_* settings (overrides win)."""
    c = conf.get()
    values: dict[str, Any] = {
        "redis_url": settings.REDIS_URL,
        "host": c.hostname,
        "gpus": c.gpus,
        "queues": parse_workers(c.workers),
        "handler_modules": list(c.handler_modules),
        "namespace": c.namespace,
        "reserve_bytes": c.vram_reserve,
        "context_bytes": c.vram_cuda_context,
        "margin_bytes": c.vram_margin,
        "max_restarts": c.max_restarts,
        "restart_window_s": c.restart_window_s,
        "drain_timeout_s": c.drain_timeout_s,
        "heartbeat_interval_s": c.heartbeat_interval_s,
        "heartbeat_ttl_s": c.heartbeat_ttl_s,
        "metrics_data_points": c.metrics_data_points,
        "gpu_time_hours_kept": c.gpu_time_hours_kept,
        "gpu_time_days_kept": c.gpu_time_days_kept,
        "gpu_time_max_keys": c.gpu_time_max_keys,
        "log_format": c.log_format,
        "liveness_file": c.liveness_file or None,
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
