"""Amazon SES bounce/complaint notifications delivered as e-mail (SNS e-mail protocol).

The body is the SNS envelope JSON whose ``Message`` member is itself JSON
(``notificationType`` ``Bounce`` or ``Complaint``), as documented in the Amazon SES
developer guide, "Contents of notifications for Amazon SES".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from outbox.bounce_parsing.addresses import clean_address


@dataclass
class Notice:
    kind: str  # "bounce" or "complaint"
    recipient: str | None
    permanent: bool
    status: str | None
    diagnostic: str
    message_id: str | None
    reporting_mta: str | None
    source: str | None = None


def _load(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1], strict=False)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    inner = data.get("Message")
    if isinstance(inner, str):
        try:
            inner_data = json.loads(inner, strict=False)
        except ValueError:
            return None
        return inner_data if isinstance(inner_data, dict) else None
    return data if "notificationType" in data or "eventType" in data else None


def _message_id(mail: Any) -> str | None:
    if not isinstance(mail, dict):
        return None
    for item in mail.get("headers") or []:
        if isinstance(item, dict) and str(item.get("name", "")).lower() == "message-id":
            return str(item.get("value"))
    common = mail.get("commonHeaders")
    if isinstance(common, dict) and "@" in str(common.get("messageId", "")):
        return str(common["messageId"])
    return None


def _source(mail: Any) -> str | None:
    """The envelope sender SES mailed from (it may carry a VERP token)."""
    return (str(mail.get("source") or "") or None) if isinstance(mail, dict) else None


def _bounces(bounce: dict[str, Any], message_id: str | None, source: str | None) -> list[Notice]:
    permanent = str(bounce.get("bounceType", "")).lower() == "permanent"
    mta = bounce.get("reportingMTA")
    reporting_mta = str(mta).split(";", 1)[-1].strip() if mta else None
    return [
        Notice(
            kind="bounce",
            recipient=clean_address(str(item.get("emailAddress") or "")),
            permanent=permanent,
            status=str(item["status"]) if item.get("status") else None,
            diagnostic=str(item.get("diagnosticCode") or ""),
            message_id=message_id,
            reporting_mta=reporting_mta,
            source=source,
        )
        for item in bounce.get("bouncedRecipients") or []
        if isinstance(item, dict)
    ]


def _complaints(
    complaint: dict[str, Any], message_id: str | None, source: str | None
) -> list[Notice]:
    return [
        Notice(
            kind="complaint",
            recipient=clean_address(str(item.get("emailAddress") or "")),
            permanent=True,
            status=None,
            diagnostic=str(complaint.get("complaintFeedbackType") or "abuse"),
            message_id=message_id,
            reporting_mta=None,
            source=source,
        )
        for item in complaint.get("complainedRecipients") or []
        if isinstance(item, dict)
    ]


def parse(text: str) -> list[Notice]:
    """Notices in an SES notification body; ``[]`` if the text is not one."""
    if "notificationType" not in text and "eventType" not in text:
        return []
    data = _load(text)
    if data is None:
        return []
    kind = str(data.get("notificationType") or data.get("eventType") or "").lower()
    mail = data.get("mail")
    message_id = _message_id(mail)
    if kind == "bounce" and isinstance(data.get("bounce"), dict):
        return _bounces(data["bounce"], message_id, _source(mail))
    if kind == "complaint" and isinstance(data.get("complaint"), dict):
        return _complaints(data["complaint"], message_id, _source(mail))
    return []
