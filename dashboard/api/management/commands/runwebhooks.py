"""`manage.py runwebhooks`: the webhook dispatcher of this host (SIGTERM or
Ctrl-C stops reading and lets running deliveries finish).

With BULLPEN_LIVENESS_FILE (or --liveness-file) it rewrites that file every
few seconds while its threads run; `manage.py runwebhooks --check-alive
--max-age 30` is the exec probe (exit 0 when fresh, 1 with the reason)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError

from dashboard.api.signals import sync_all
from dashboard.api.webhooks.dispatcher import Dispatcher, DispatcherConfig
from dashboard.shared import conf
from gpu_workers.liveness import (
    LIVENESS_INTERVAL_S,
    LIVENESS_MAX_AGE_S,
    LivenessFile,
    check_alive,
)

log = logging.getLogger(__name__)


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
        parser.add_argument(
            "--liveness-file", help="override BULLPEN_LIVENESS_FILE for this process"
        )
        parser.add_argument(
            "--check-alive",
            action="store_true",
            help="exit 0 if a running dispatcher's liveness file is fresh, else 1",
        )
        parser.add_argument(
            "--max-age",
            type=float,
            default=LIVENESS_MAX_AGE_S,
            help="seconds (with --check-alive)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        liveness_file = options.get("liveness_file") or conf.get().liveness_file
        if options["check_alive"]:
            code = check_alive(liveness_file, options["max_age"])
            if code:
                raise SystemExit(code)
            return
        logging.basicConfig(
            level=logging.INFO,
            format="%(asctime)s %(levelname)s [runwebhooks] %(name)s: %(message)s",
        )
        try:
            count = sync_all()
            self.stdout.write(f"mirrored {count} webhook subscription(s) to Redis")
        except DatabaseError as exc:
            # Logged, not written: a JSON log stays all JSON.
            log.warning("subscriptions not re-synced (database: %s)", exc)
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
        dispatcher = Dispatcher(config)
        stop = threading.Event()
        beating = threading.Thread(
            target=_beat,
            args=(
                LivenessFile(liveness_file or "", LIVENESS_INTERVAL_S),
                dispatcher,
                stop,
            ),
            name="webhook-liveness",
            daemon=True,
        )
        if liveness_file:
            beating.start()
        try:
            dispatcher.run()
        finally:
            stop.set()
            if liveness_file:
                beating.join(5.0)
                LivenessFile(liveness_file, LIVENESS_INTERVAL_S).remove()


def _beat(file: LivenessFile, dispatcher: Dispatcher, stop: threading.Event) -> None:
    """Rewrite the liveness file while the dispatcher's threads run."""
    while not stop.wait(1.0):
        if dispatcher.alive():
            try:
                file.beat()
            except OSError as exc:  # the probe then fails, which says enough
                log.warning("liveness file: %s", exc)
