"""Mirror webhook subscriptions into Redis whenever one is saved or deleted,
so the dispatcher reads them without the database."""

from __future__ import annotations

import logging
from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from . import store
from .models import WebhookSubscription
from .webhooks import registry

log = logging.getLogger("dashboard.api")


@receiver(post_save, sender=WebhookSubscription)
def subscription_saved(
    sender: Any, instance: WebhookSubscription, **kwargs: Any
) -> None:
    """Write the subscription to the mirror (and follow its queue)."""
    registry.mirror_subscription(store.client(), store.keys(), instance.mirror())


@receiver(post_delete, sender=WebhookSubscription)
def subscription_deleted(
    sender: Any, instance: WebhookSubscription, **kwargs: Any
) -> None:
    """Drop the subscription from the mirror."""
    registry.forget_subscription(store.client(), store.keys(), instance.pk)


def sync_all() -> int:
    """Rebuild the mirror from the database; returns the count."""
    subs = [s.mirror() for s in WebhookSubscription.objects.all()]
    registry.sync_subscriptions(store.client(), store.keys(), subs)
    return len(subs)
