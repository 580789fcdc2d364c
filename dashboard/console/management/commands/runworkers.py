"""`manage.py runworkers`: the GPU worker supervisor of this host.

Only reads settings and hands them to gpu_workers (which never imports
Django, so worker processes start fast); SIGTERM or Ctrl-C drains.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.shared import conf
from dashboard.shared.conf import named
from gpu_workers import SupervisorConfig, parse_workers
from gpu_workers.envconfig import GPU_ROWS, supervisor_field
from gpu_workers.exceptions import ConfigError
from gpu_workers.supervisor import run_supervisor


def config_from_settings(**overrides: Any) -> SupervisorConfig:
    """A SupervisorConfig from the settings of the table's GPU rows
    (gpu_workers/envconfig.py maps each to its field; overrides win)."""
    c = conf.get()
    values: dict[str, Any] = {
        supervisor_field(row): getattr(c, row.attr) for row in GPU_ROWS
    }
    values["queues"] = parse_workers(c.workers)
    values["handler_modules"] = list(c.handler_modules)
    values["liveness_file"] = c.liveness_file or None
    values.update({k: v for k, v in overrides.items() if v is not None})
    return SupervisorConfig(**values)


class Command(BaseCommand):
    help = "Run this host's GPU worker supervisor (SIGTERM drains)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--gpus", help=f"override {named('gpus')} (e.g. sim:2x24GiB)"
        )
        parser.add_argument("--host", help=f"override {named('hostname')}")
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
