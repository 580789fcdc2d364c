"""Django admin: API tokens (the plain token is shown once, on creation),
per-queue JSON Schemas and settings, and webhook subscriptions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from .models import ApiToken, QueueSchema, QueueSettings, WebhookSubscription

# ModelAdmin is generic only in django-stubs, not at run time.
if TYPE_CHECKING:
    _ApiTokenAdminBase = admin.ModelAdmin[ApiToken]
    _QueueSchemaAdminBase = admin.ModelAdmin[QueueSchema]
    _QueueSettingsAdminBase = admin.ModelAdmin[QueueSettings]
    _WebhookSubscriptionAdminBase = admin.ModelAdmin[WebhookSubscription]
else:
    _ApiTokenAdminBase = _QueueSchemaAdminBase = admin.ModelAdmin
    _QueueSettingsAdminBase = _WebhookSubscriptionAdminBase = admin.ModelAdmin


@admin.register(ApiToken)
class ApiTokenAdmin(_ApiTokenAdminBase):
    """Create, inspect and revoke tokens; the key itself is never shown again."""

    list_display = (
        "name",
        "prefix",
        "queues",
        "can_read",
        "can_write",
        "can_admin",
        "group_id",
        "rate_limit_per_min",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = ("can_read", "can_write", "can_admin", "group_jobs")
    search_fields = ("name", "prefix", "queues", "group")
    readonly_fields = ("prefix", "created_at", "last_used_at", "webhook_secret")
    actions = ("revoke",)

    def save_model(
        self, request: HttpRequest, obj: ApiToken, form: Any, change: bool
    ) -> None:
        plain = None if change else obj.set_new_key()
        super().save_model(request, obj, form, change)
        if plain is not None:
            self.message_user(
                request,
                f"Token for {obj.name}: {plain} (copy it now, it is not stored). "
                f"Webhook signing secret: {obj.webhook_secret}",
                messages.WARNING,
            )

    @admin.display(description="jobs' group")
    def group_id(self, obj: ApiToken) -> str:
        """The group its jobs take ("-": none)."""
        if not obj.group_jobs:
            return "-"
        return obj.group_id + ("/…" if obj.may_set_group else "")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        """Revoke now."""
        count = queryset.filter(revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        self.message_user(request, f"Revoked {count} token(s).")


@admin.register(QueueSchema)
class QueueSchemaAdmin(_QueueSchemaAdminBase):
    """JSON Schemas that job data of a queue must satisfy."""

    list_display = ("queue", "description", "updated_at")
    search_fields = ("queue",)


@admin.register(QueueSettings)
class QueueSettingsAdmin(_QueueSettingsAdminBase):
    """Default job options per queue, under each enqueue request's options."""

    list_display = ("queue", "default_job_options", "updated_at")
    search_fields = ("queue",)


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(_WebhookSubscriptionAdminBase):
    """Queue-wide webhooks (mirrored to Redis for the dispatcher on save)."""

    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = ("queue", "url", "events", "active", "created_at")
    list_filter = ("active", "queue")
    search_fields = ("queue", "url")
    readonly_fields = ("created_at",)
