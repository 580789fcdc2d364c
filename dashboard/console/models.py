"""The operator app's models: the audit log and the dashboard's permissions."""

from __future__ import annotations

from django.conf import settings
from django.db import models

VIEW = "dashboard.view_queues"
OPERATE = "dashboard.operate_queues"
SCALE = "dashboard.scale_workers"


class Permissions(models.Model):
    """Holds the dashboard's custom permissions; it has no table.

    view_queues: read every page. operate_queues: act on jobs and queues (retry,
    remove, promote, cancel, clean, pause, drain, obliterate). scale_workers:
    change capacity (desired workers, global concurrency, rate limits).
    """

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_queues", "Can view queues, jobs and workers"),
            ("operate_queues", "Can act on jobs and queues"),
            ("scale_workers", "Can scale workers and set queue limits"),
        ]


class AuditEntry(models.Model):
    """One operator action: who, when, on what, and how it went."""

    OK = "ok"
    ERROR = "error"
    DENIED = "denied"
    OUTCOMES = [(OK, "ok"), (ERROR, "error"), (DENIED, "denied")]

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    #: Kept beside the foreign key so the row still says who after a user is deleted.
    username = models.CharField(max_length=150)
    #: `prefix:queue` or `prefix:queue:job id`.
    target = models.CharField(max_length=400, db_index=True)
    action = models.CharField(max_length=64)
    outcome = models.CharField(max_length=8, choices=OUTCOMES)
    #: Parameters and result or error message, as text.
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return (
            f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.username} {self.action} "
            f"{self.target}: {self.outcome}"
        )
