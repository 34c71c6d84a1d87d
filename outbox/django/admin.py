"""Outbox in the Django admin: emails, suppressions and the audit trail, read-only.

Django loads this module when ``outbox.django`` and ``django.contrib.admin``
are both installed. Searches find an email by key, row id, Message-ID,
provider id or address (through the address's keyed hash, as the console
does); the actions (requeue, cancel, suppress, unsuppress) go through
:mod:`outbox.django.admin_actions`, each with a reason, audited with the
Django user. Addresses appear as their tags unless the user has the
``outbox.reveal_address`` permission.
"""

from __future__ import annotations

import contextvars
import functools
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm

from outbox import redact
from outbox.config import Settings
from outbox.db.store import console_reads
from outbox.django import admin_actions
from outbox.django.models import AuditEntry, Email, Suppression

REVEAL = "outbox.reveal_address"
# Whether the request being answered may see addresses in clear.
_clear: contextvars.ContextVar[bool] = contextvars.ContextVar("outbox_clear", default=False)


@functools.cache
def _redactor() -> redact.Redactor:
    return redact.Redactor.from_settings(Settings.from_env())


def _text(value: object, known: list[str] | None = None) -> str:
    """``value`` as this request may see it: addresses tagged, unless revealed."""
    text = "" if value is None else str(value)
    if _clear.get():
        return _redactor().secrets_only(text)
    return _redactor().known(text, known) if known else _redactor().text(text)


def _tag(address: str) -> str:
    return redact.recipient_tag(address, secret=Settings.from_env().secret)


def _rendered(request: Any, view: Any) -> Any:
    """``view()``'s response, rendered while this request's reveal flag is set: a
    template response renders after the view returns, and its cells are drawn then."""
    token = _clear.set(request.user.has_perm(REVEAL))
    try:
        response = view()
        if hasattr(response, "render") and not getattr(response, "is_rendered", True):
            response.render()
        return response
    finally:
        _clear.reset(token)


class ReasonForm(ActionForm):  # type: ignore[misc]  # Django ships no types
    reason = forms.CharField(required=False, max_length=500, label="Why (for the audit trail)")


class _OutboxAdmin(admin.ModelAdmin):  # type: ignore[misc]
    """Read-only pages; actions need a reason and the change permission."""

    action_form = ReasonForm

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        # The list's actions need it; a row's own page is read-only (nothing to save).
        return obj is None and bool(super().has_change_permission(request, obj))

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        raise PermissionError("Outbox's rows change through its actions only")

    def changelist_view(self, request: Any, extra_context: Any = None) -> Any:
        return _rendered(request, lambda: super(_OutboxAdmin, self).changelist_view(
            request, extra_context
        ))  # fmt: skip

    def change_view(self, request: Any, object_id: str, *args: Any, **kwargs: Any) -> Any:
        return _rendered(request, lambda: super(_OutboxAdmin, self).change_view(
            request, object_id, *args, **kwargs
        ))  # fmt: skip

    def get_actions(self, request: Any) -> Any:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def reason(self, request: Any) -> str | None:
        """The action's reason, or None (and a message) when none was given."""
        reason = " ".join(request.POST.get("reason", "").split())
        if not reason:
            self.message_user(request, "Say why (the reason goes into the audit trail).",
                              messages.ERROR)  # fmt: skip
            return None
        return reason

    def done(self, request: Any, what: str) -> None:
        self.message_user(request, what, messages.SUCCESS)


class TemplateFilter(admin.SimpleListFilter):  # type: ignore[misc]
    title = "template"
    parameter_name = "template"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        with admin_actions.own_connection() as conn:
            return [(t, t) for t in console_reads.console_templates(conn)]

    def queryset(self, request: Any, queryset: Any) -> Any:
        return queryset.filter(template=self.value()) if self.value() else queryset


class TagFilter(admin.SimpleListFilter):  # type: ignore[misc]
    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        recent = Email.objects.order_by("-id").values_list("tags", flat=True)[:2000]
        tags = sorted({t for tags in recent if tags for t in tags})
        return [(t, t) for t in tags]

    def queryset(self, request: Any, queryset: Any) -> Any:
        return queryset.filter(tags__contains=[self.value()]) if self.value() else queryset


@admin.register(Email)
class EmailAdmin(_OutboxAdmin):
    list_display = ("id", "key", "to", "template", "priority", "status", "reason_shown",
                    "attempts", "created_at")  # fmt: skip
    list_filter = ("status", "priority", TemplateFilter, TagFilter,
                   ("created_at", admin.DateFieldListFilter))  # fmt: skip
    search_fields = ("idempotency_key",)  # found through the store: get_search_results
    search_help_text = "Idempotency key, row id, Message-ID, provider id or address"
    fields = readonly_fields = (
        "id", "key", "to", "copies", "blind_copies", "replies", "sender", "subject", "template",
        "locale", "priority", "status", "reason_shown", "attempts", "error_shown", "message_id",
        "provider_message_id", "tags", "metadata", "headers", "send_at", "created_at", "sent_at",
        "failed_at", "bounce_class",
    )  # fmt: skip
    actions = ("requeue", "cancel", "suppress_recipient")
    show_full_result_count = False  # no count(*) of the whole table at each visit

    def get_search_results(self, request: Any, queryset: Any, search_term: str) -> Any:
        if not search_term.strip():
            return queryset, False
        return queryset.filter(id__in=admin_actions.found_ids(search_term)), False

    @admin.display(description="idempotency key")  # type: ignore[untyped-decorator]
    def key(self, obj: Email) -> str:
        return _text(obj.idempotency_key, _addresses(obj))

    @admin.display(description="recipient")  # type: ignore[untyped-decorator]
    def to(self, obj: Email) -> str:
        return _text(obj.recipient)

    @admin.display(description="cc")  # type: ignore[untyped-decorator]
    def copies(self, obj: Email) -> str:
        return _text(", ".join(obj.cc or ()))

    @admin.display(description="bcc")  # type: ignore[untyped-decorator]
    def blind_copies(self, obj: Email) -> str:
        return _text(", ".join(obj.bcc or ()))

    @admin.display(description="reply-to")  # type: ignore[untyped-decorator]
    def replies(self, obj: Email) -> str:
        return _text(", ".join(obj.reply_to or ()))

    @admin.display(description="status reason")  # type: ignore[untyped-decorator]
    def reason_shown(self, obj: Email) -> str:
        return _text(obj.status_reason)

    @admin.display(description="last error")  # type: ignore[untyped-decorator]
    def error_shown(self, obj: Email) -> str:
        return _text(obj.last_error)

    @admin.action(description="Requeue (failed, dead, held)", permissions=["change"])  # type: ignore[untyped-decorator]
    def requeue(self, request: Any, queryset: Any) -> None:
        reason = self.reason(request)
        if reason is not None:
            n = admin_actions.requeue(request.user.get_username(), list(queryset), reason)
            self.done(request, f"Requeued {n} email(s).")

    @admin.action(description="Cancel (not yet taken by a worker)", permissions=["change"])  # type: ignore[untyped-decorator]
    def cancel(self, request: Any, queryset: Any) -> None:
        reason = self.reason(request)
        if reason is not None:
            n = admin_actions.cancel(request.user.get_username(), list(queryset), reason)
            self.done(request, f"Cancelled {n} email(s).")

    @admin.action(description="Suppress the recipient (all mail)", permissions=["change"])  # type: ignore[untyped-decorator]
    def suppress_recipient(self, request: Any, queryset: Any) -> None:
        reason = self.reason(request)
        if reason is not None:
            addresses = [e.recipient for e in queryset]
            n = admin_actions.suppress(request.user.get_username(), addresses, reason, tag=_tag)
            self.done(request, f"Suppressed {n} address(es).")


def _addresses(obj: Email) -> list[str]:
    return [obj.recipient, *(obj.cc or ()), *(obj.bcc or ()), *(obj.reply_to or ())]


@admin.register(Suppression)
class SuppressionAdmin(_OutboxAdmin):
    list_display = ("shown", "scope", "reason", "detail", "created_at")
    list_filter = ("scope", "reason", ("created_at", admin.DateFieldListFilter))
    search_fields = ("address",)
    search_help_text = "The whole address"
    fields = readonly_fields = ("shown", "scope", "reason", "detail", "created_at")
    actions = ("unsuppress",)

    def get_search_results(self, request: Any, queryset: Any, search_term: str) -> Any:
        term = search_term.strip().lower()
        return (queryset.filter(address=term) if term else queryset), False

    @admin.display(description="address")  # type: ignore[untyped-decorator]
    def shown(self, obj: Suppression) -> str:
        return _text(obj.address)

    @admin.action(description="Unsuppress: may get mail again", permissions=["change"])  # type: ignore[untyped-decorator]
    def unsuppress(self, request: Any, queryset: Any) -> None:
        reason = self.reason(request)
        if reason is not None:
            addresses = [s.address for s in queryset]
            n = admin_actions.unsuppress(request.user.get_username(), addresses, reason, tag=_tag)
            self.done(request, f"Unsuppressed {n} address(es).")


@admin.register(AuditEntry)
class AuditAdmin(_OutboxAdmin):
    list_display = ("at", "actor", "role", "action", "target_shown", "reason")
    list_filter = ("action", "role", ("at", admin.DateFieldListFilter))
    fields = readonly_fields = ("at", "actor", "role", "action", "target_shown", "reason", "detail")
    actions = ()

    @admin.display(description="target")  # type: ignore[untyped-decorator]
    def target_shown(self, obj: AuditEntry) -> str:
        return _text(obj.target)
