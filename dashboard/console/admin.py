"""The audit log, read-only in Django's admin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.http import HttpRequest

from .models import AuditEntry

# ModelAdmin is generic only in django-stubs, not at run time.
if TYPE_CHECKING:
    _AuditEntryAdminBase = admin.ModelAdmin[AuditEntry]
else:
    _AuditEntryAdminBase = admin.ModelAdmin


@admin.register(AuditEntry)
class AuditEntryAdmin(_AuditEntryAdminBase):
    """Searchable, never editable."""

    list_display = ("created_at", "username", "action", "target", "outcome")
    list_filter = ("outcome", "action")
    search_fields = ("username", "target", "detail")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
