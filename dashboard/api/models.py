"""API tokens, per-queue JSON Schemas and settings, and webhook subscriptions."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import orjson
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from queues.exceptions import InvalidJobOptions
from queues.names import is_safe_queue_name
from queues.options import check_default_job_options

from ..shared import conf
from . import defaults, grouping, tokens
from .exceptions import Unprocessable
from .schemas import DEFAULT_JOB_OPTIONS
from .validation import check_webhook_url


def _split(text: str) -> list[str]:
    return [p.strip() for p in text.replace("\n", ",").split(",") if p.strip()]


class ApiToken(models.Model):
    """A producer's credential: hashed, scoped to queues and to read/write."""

    name = models.CharField(max_length=100, help_text="Who or what uses it.")
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    queues = models.TextField(
        help_text="Queue names it may use, comma or newline separated; "
        "* for every queue."
    )
    can_read = models.BooleanField(
        default=True, help_text="Job status, events, counts."
    )
    can_write = models.BooleanField(default=False, help_text="Enqueue and cancel.")
    can_admin = models.BooleanField(
        default=False,
        help_text="Read and change the queues' group settings (pause, weights, "
        "limits).",
    )
    group_jobs = models.BooleanField(
        default=True,
        help_text="Put every job it enqueues in its group (fair turns between "
        "tokens); off: its jobs have no group.",
    )
    group = models.CharField(
        max_length=grouping.GROUP_ID_MAX_CHARS,
        blank=True,
        help_text="Its jobs' group; empty: derived from the name (characters "
        "other than letters, digits and _.@+- become -).",
    )
    may_set_group = models.BooleanField(
        default=False,
        help_text="Requests may send options.group: the job's group is then "
        '"<its group>/<given>" (its own sub-customers).',
    )
    rate_limit_per_min = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Requests per minute; empty for the site default.",
    )
    webhook_secret = models.CharField(
        max_length=64,
        default=tokens.generate_secret,
        editable=False,
        help_text="Signs the webhooks of jobs enqueued with this token.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    @classmethod
    def issue(
        cls,
        name: str,
        queues: str | list[str],
        can_read: bool = True,
        can_write: bool = False,
        rate_limit_per_min: int | None = None,
        **more: Any,
    ) -> tuple[ApiToken, str]:
        """Create a token; returns it and the plain token (shown only now).
        `more`: other fields (can_admin, group, group_jobs, may_set_group)."""
        token = cls(
            name=name,
            queues=queues if isinstance(queues, str) else ",".join(queues),
            can_read=can_read,
            can_write=can_write,
            rate_limit_per_min=rate_limit_per_min,
            **more,
        )
        plain = token.set_new_key()
        token.full_clean()
        token.save()
        return token, plain

    def set_new_key(self) -> str:
        """Give the token a fresh key; returns the plain token."""
        plain, self.prefix = tokens.generate()
        self.key_hash = tokens.hash_token(plain)
        return plain

    def clean(self) -> None:
        names = self.queue_list
        if not names:
            raise ValidationError({"queues": "name at least one queue, or *"})
        bad = [n for n in names if n != "*" and not is_safe_queue_name(n)]
        if bad:
            raise ValidationError({"queues": f"not a queue name: {', '.join(bad)}"})
        if not (self.can_read or self.can_write or self.can_admin):
            raise ValidationError("a token needs read, write, admin or some of them")
        if self.group and not grouping.is_group_id(self.group):
            raise ValidationError({"group": f"group ids are {grouping.GROUP_ID_RULE}"})
        if self.may_set_group and not self.group_jobs:
            raise ValidationError(
                {"may_set_group": "a token whose jobs have no group cannot set one"}
            )

    @property
    def group_id(self) -> str:
        """Its jobs' group: the explicit one, else derived from its name."""
        return self.group or grouping.derived_group(self.name)

    @property
    def queue_list(self) -> list[str]:
        """The queue names (or `*`) it may use."""
        return _split(self.queues)

    @property
    def is_active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None

    def allows_queue(self, queue: str) -> bool:
        """Whether the token may use this queue."""
        names = self.queue_list
        return "*" in names or queue in names

    def revoke(self) -> None:
        """Revoke now (idempotent)."""
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])


class QueueSchema(models.Model):
    """An optional JSON Schema that enqueued job data must satisfy."""

    queue = models.CharField(max_length=100, unique=True)
    json_schema = models.JSONField(
        help_text="JSON Schema (draft 2020-12) of the job data."
    )
    description = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "queue JSON Schema"

    def __str__(self) -> str:
        return self.queue

    def clean(self) -> None:
        if not is_safe_queue_name(self.queue or ""):
            raise ValidationError({"queue": "not a queue name"})
        try:
            Draft202012Validator.check_schema(self.json_schema)
        except SchemaError as exc:
            raise ValidationError({"json_schema": exc.message}) from None

    @classmethod
    def check_data(cls, queue: str, data: Any) -> None:
        """Job data must satisfy the queue's JSON Schema, when it has one
        (Unprocessable listing the violations otherwise)."""
        row = cls.objects.filter(queue=queue).only("json_schema").first()
        if row is None:
            return
        validator = _compiled(
            orjson.dumps(row.json_schema, option=orjson.OPT_SORT_KEYS).decode()
        )
        errors = sorted(
            validator.iter_errors(data), key=lambda e: list(e.absolute_path)
        )
        if errors:
            raise Unprocessable(
                "schema_validation_failed",
                f"data does not match the JSON Schema of queue {queue}",
                {
                    "errors": [
                        {
                            "path": "/".join(str(p) for p in e.absolute_path),
                            "message": e.message[:300],
                        }
                        for e in errors[:20]
                    ]
                },
            )


@lru_cache(maxsize=256)
def _compiled(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(orjson.loads(schema_json))


class QueueSettings(models.Model):
    """Per-queue settings of the API: default options of the jobs it enqueues."""

    queue = models.CharField(max_length=100, unique=True)
    default_job_options = models.JSONField(
        default=dict,
        blank=True,
        help_text='Like a request\'s "options", e.g. {"attempts": 3}; '
        "the request's own options win key by key.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "queue settings"
        verbose_name_plural = "queue settings"

    def __str__(self) -> str:
        return self.queue

    @classmethod
    def job_defaults(cls, queue: str) -> dict[str, Any]:
        """The queue's default job options ({} when it has no settings)."""
        row = cls.objects.filter(queue=queue).only("default_job_options").first()
        return dict(row.default_job_options) if row is not None else {}

    def clean(self) -> None:
        if not is_safe_queue_name(self.queue or ""):
            raise ValidationError({"queue": "not a queue name"})
        validator = Draft202012Validator(DEFAULT_JOB_OPTIONS)
        error = best_match(validator.iter_errors(self.default_job_options))
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path)
            message = f"{where}: {error.message}" if where else error.message
            raise ValidationError({"default_job_options": message})
        try:
            check_default_job_options(self.default_job_options)
        except InvalidJobOptions as exc:
            raise ValidationError({"default_job_options": str(exc)}) from None


def _default_events() -> str:
    return ",".join(defaults.WEBHOOK_EVENTS)


class WebhookSubscription(models.Model):
    """Every job of a queue sends these events to a URL."""

    queue = models.CharField(max_length=100)
    url = models.URLField(max_length=2000)
    events = models.CharField(
        max_length=100,
        default=_default_events,
        help_text="Comma separated: " + ", ".join(defaults.WEBHOOK_EVENTS),
    )
    secret = models.CharField(max_length=64, default=tokens.generate_secret)
    active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["queue", "id"]
        verbose_name = "webhook subscription"

    def __str__(self) -> str:
        return f"{self.queue} -> {self.url}"

    @property
    def event_list(self) -> list[str]:
        """The events it is sent."""
        return _split(self.events)

    def clean(self) -> None:
        if not is_safe_queue_name(self.queue or ""):
            raise ValidationError({"queue": "not a queue name"})
        if self.queue == conf.get().webhook_queue:
            raise ValidationError({"queue": "the webhook delivery queue is internal"})
        unknown = set(self.event_list) - set(defaults.WEBHOOK_EVENTS)
        if unknown or not self.event_list:
            raise ValidationError(
                {"events": "choose from " + ", ".join(defaults.WEBHOOK_EVENTS)}
            )
        try:
            check_webhook_url(self.url)
        except Exception as exc:  # noqa: BLE001 - any refusal is a form error
            raise ValidationError({"url": getattr(exc, "message", str(exc))}) from None

    def mirror(self) -> dict[str, Any]:
        """What the dispatcher reads from Redis."""
        return {
            "id": self.pk,
            "prefix": conf.get().prefix,
            "queue": self.queue,
            "url": self.url,
            "events": self.event_list,
            "secret": self.secret,
            "active": self.active,
        }
