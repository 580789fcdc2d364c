"""`manage.py runwebhooks`: the webhook dispatcher of this host (SIGTERM or
Ctrl-C stops reading and lets running deliveries finish)."""

from __future__ import annotations

import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError

from dashboard.api.signals import sync_all
from dashboard.api.webhooks.dispatcher import Dispatcher, DispatcherConfig


class Command(BaseCommand):
    help = "Run the webhook dispatcher (events streams -> signed deliveries)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--consumer", help="consumer name (default: host name)")
        parser.add_argument("--concurrency", type=int, help="deliveries at once")
        parser.add_argument(
            "--no-deliver", action="store_true", help="only read events (no sending)"
        )
        parser.add_argument(
            "--no-read", action="store_true", help="only send queued deliveries"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        logging.basicConfig(
            level=logging.INFO,
            format="%(asctime)s %(levelname)s [runwebhooks] %(name)s: %(message)s",
        )
        try:
            count = sync_all()
            self.stdout.write(f"mirrored {count} webhook subscription(s) to Redis")
        except DatabaseError as exc:
            self.stderr.write(f"subscriptions not re-synced (database: {exc})")
        config = DispatcherConfig.from_settings(
            consumer=options.get("consumer"),
            concurrency=options.get("concurrency"),
            deliver=not options["no_deliver"],
            read=not options["no_read"],
        )
        private = "allowed" if config.policy.allow_private else "refused"
        self.stdout.write(
            f"dispatching webhooks as {config.consumer} "
            f"(private destinations {private})"
        )
        self.stdout.flush()
        Dispatcher(config).run()
