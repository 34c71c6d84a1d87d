"""Bounces and complaints reported by an email API's webhook (pure).

Postmark posts one JSON object per event (``RecordType`` ``Bounce``,
``SpamComplaint`` or ``SubscriptionChange``; Postmark developer docs, "Bounce
webhook", "Spam complaint webhook", "Subscription change webhook"). Resend posts
Svix-signed events (``email.bounced``, ``email.complained``,
``email.delivery_delayed``; Resend docs, "Webhooks / Event types"), whose bounce
types are those of Amazon SES.

The provider's own category is one opinion and the reply text it quotes is
another: a provider's "hard bounce" whose text is a policy refusal ("550 5.7.1
blocked") is ``soft`` here, as it would be in a bounce message, because
suppressing a recipient whose mailbox is fine would be wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from outbox.bounce_parsing.addresses import clean_address
from outbox.bounce_parsing.bounce_result import BounceResult, Failure, Klass
from outbox.bounce_parsing.verdict import judge
from outbox.errors import WebhookError

PROVIDERS = ("postmark", "resend")

# Postmark bounce types (API "Bounce types" table) -> class.
_POSTMARK_CLASS: dict[str, Klass] = {
    "HardBounce": "hard",
    "BadEmailAddress": "hard",
    "ManuallyDeactivated": "hard",
    "SpamComplaint": "complaint",
    "AutoResponder": "other",
    "Subscribe": "other",
    "AddressChange": "other",
    "OpenRelayTest": "other",
    "ChallengeVerification": "other",
    "InboundError": "other",
    "TemplateRenderingFailed": "other",
}
# Postmark suppresses on these; the matching class here.
_POSTMARK_SUPPRESSION: dict[str, Klass] = {
    "HardBounce": "hard",
    "SpamComplaint": "complaint",
    "ManualSuppression": "complaint",
}
# Reasons kept from a policy reading of the text even when the provider says hard.
_NOT_ENOUGH = frozenset({"unknown", "unconfirmed_user"})


@dataclass(frozen=True, slots=True)
class ProviderReport:
    """What one webhook call says: results empty for events that are no verdict."""

    provider: str
    provider_message_id: str | None
    results: list[BounceResult]
    event_id: str | None = None


def parse(provider: str, body: bytes, event_id: str | None = None) -> ProviderReport:
    """The report in a webhook body; raises :class:`WebhookError` if it is not one."""
    data = _object(body)
    if provider == "postmark":
        return _postmark(data)
    if provider == "resend":
        return _resend(data, event_id)
    raise WebhookError(f"no webhook parser for {provider!r}")


def _object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WebhookError(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise WebhookError("the body is not a JSON object")
    return data


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return str(value).strip() if value is not None else ""


def _postmark(data: dict[str, Any]) -> ProviderReport:
    record_type = _text(data, "RecordType")
    if not record_type:
        raise WebhookError("a Postmark event has a RecordType")
    message_id = _text(data, "MessageID") or None
    event = _text(data, "ID")
    event_id = f"{record_type}:{event}" if event else None
    recipient = clean_address(_text(data, "Email") or _text(data, "Recipient")) or None
    results: list[BounceResult] = []
    if record_type in ("Bounce", "SpamComplaint"):
        kind = _text(data, "Type") or record_type
        provider_class = _POSTMARK_CLASS.get(kind, "soft")
        details = _text(data, "Details") or _text(data, "Description")
        results.append(_result(provider_class, recipient, details, kind))
    elif record_type == "SubscriptionChange" and data.get("SuppressSending") is True:
        reason = _text(data, "SuppressionReason")
        klass = _POSTMARK_SUPPRESSION.get(reason)
        if klass is not None:
            # A recipient who unsubscribed through Postmark's link stops bulk mail only.
            label = "unsubscribe" if reason == "ManualSuppression" else reason
            results.append(BounceResult(klass, recipient, reason=label))
    elif record_type not in ("Delivery", "Open", "Click", "SubscriptionChange"):
        raise WebhookError(f"unknown Postmark RecordType {record_type!r}")
    return ProviderReport("postmark", message_id, results, event_id)


def _resend(data: dict[str, Any], event_id: str | None) -> ProviderReport:
    kind = _text(data, "type")
    body = data.get("data")
    if not kind.startswith("email.") or not isinstance(body, dict):
        raise WebhookError("a Resend event has a type email.* and a data object")
    message_id = _text(body, "email_id") or None
    to = body.get("to")
    addresses = [clean_address(str(a)) for a in to] if isinstance(to, list) else []
    recipients: list[str | None] = [a for a in addresses if a] or [None]
    results: list[BounceResult] = []
    if kind == "email.bounced":
        found = body.get("bounce")
        bounce: dict[str, Any] = found if isinstance(found, dict) else {}
        permanent = _text(bounce, "type").lower() == "permanent"
        label = _text(bounce, "subType") or _text(bounce, "type") or "bounce"
        details = _text(bounce, "message")
        results = [_result("hard" if permanent else "soft", r, details, label) for r in recipients]
    elif kind == "email.complained":
        results = [BounceResult("complaint", r, reason="complaint") for r in recipients]
    elif kind == "email.delivery_delayed":
        results = [BounceResult("soft", r, reason="delayed") for r in recipients]
    return ProviderReport("resend", message_id, results, event_id)


def _result(provider_class: Klass, recipient: str | None, details: str, label: str) -> BounceResult:
    """Weigh the provider's class against a reading of the reply text it quotes."""
    if provider_class in ("complaint", "other"):
        return BounceResult(provider_class, recipient, diagnostic=details or None, reason=label)
    verdict = judge(Failure(recipient=recipient, diagnostic=details)) if details else None
    klass: Klass = provider_class
    reason = label
    status = None
    if verdict is not None:
        status = verdict.status
        if verdict.reason not in _NOT_ENOUGH:
            reason = verdict.reason
        if provider_class == "hard" and verdict.klass == "soft" and reason == verdict.reason:
            klass = "soft"  # the quoted reply is a policy refusal or a temporary failure
    return BounceResult(klass, recipient, status, details or None, reason=reason)
