"""One email's page in the console: everything it was enqueued with, the message
as a worker composes it (from its template version or from the content stored
with it), and what happened to it, oldest first.

Addresses are shown as the page shows every address (tagged, unless an
operator's audited reveal); the idempotency key keeps its own words, only the
email's addresses in it tagged (:func:`outbox.redact.known_addresses`).
"""

from __future__ import annotations

import email
import email.policy
import json
from email.message import EmailMessage
from typing import Any

from outbox.db.store import sending
from outbox.errors import OutboxError
from outbox.fields.inline import INLINE
from outbox.message.compose import composer
from outbox.message.preview import PREVIEW_ID
from outbox.web.console import Console

# What the page lists of a row, in this order, each (label, column).
_WHEN = (
    ("scheduled for", "send_at"),
    ("created", "created_at"),
    ("queued", "queued_at"),
    ("next attempt", "next_attempt_at"),
    ("sent", "sent_at"),
    ("failed", "failed_at"),
    ("requeued", "requeued_at"),
)


def addresses_of(row: dict[str, Any]) -> list[str]:
    """Every address the email names: its recipient, copies and replies."""
    copies = [*(row.get("cc") or ()), *(row.get("bcc") or ()), *(row.get("reply_to") or ())]
    return [row["recipient"], *copies]


def key_shown(console: Console, row: dict[str, Any]) -> str:
    """The row's idempotency key with only the email's own addresses in it tagged."""
    return console.redactor.known(row["idempotency_key"], addresses_of(row))


def details(console: Console, row: dict[str, Any]) -> dict[str, Any]:
    """What the fields card shows beyond the row's own columns."""
    return {
        "sender": row["sender"] or f"{console.settings.sender} (OUTBOX_FROM)",
        "times": [(label, row[column]) for label, column in _WHEN if row.get(column)],
        "headers": [f"{name}: {value}" for name, value in row["headers"]],
        "metadata": json.dumps(row["metadata"], ensure_ascii=False, sort_keys=True)
        if row["metadata"]
        else "",
        "files": [
            f"{a.get('filename')} ({a.get('content_type')}, {a.get('size')} bytes)"
            for a in row["attachments"]
        ],
        "inline": row["template"] == INLINE,
    }


def message(console: Console, row: dict[str, Any]) -> dict[str, Any]:
    """The message as a worker composes it, without its links' tokens (row id 0)."""
    outbox_row = sending.OutboxRow(
        id=PREVIEW_ID,
        idempotency_key=row["idempotency_key"],
        recipient=row["recipient"],
        template=row["template"],
        params=row["params"],
        message_id=row["message_id"],
        priority=row["priority"],
        attempts=row["attempts"],
        created_at=row["created_at"],
        age_from=row["requeued_at"] or row["created_at"],
        template_version=row["template_version"],
        sender=row["sender"],
        reply_to=row["reply_to"],
        subject=row["subject"],
        body_text=row["body_text"],
        body_html=row["body_html"],
        headers=row["headers"],
        tags=row["tags"],
        metadata=row["metadata"],
        cc=row["cc"],
        bcc=row["bcc"],
        locale=row["locale"],
        attachments=row["attachments"],
    )
    try:
        data = composer(console.settings).message(
            outbox_row, to=row["recipient"], connect=console.pool.connection
        )
    except OutboxError as exc:
        return {"error": str(exc)}
    parsed = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    html_part = parsed.get_body(("html",))
    text_part = parsed.get_body(("plain",))
    return {
        "headers": [(k, str(v)) for k, v in parsed.items() if k.lower() != "dkim-signature"],
        "html": html_part.get_content() if isinstance(html_part, EmailMessage) else None,
        "text": text_part.get_content() if isinstance(text_part, EmailMessage) else None,
        "size": len(data),
    }


def attempt_label(a: dict[str, Any]) -> str:
    """``#3``, numbered across requeues; ``#3 (try 1 after a requeue)`` when the
    requeue restarted the try count of the attempt budget."""
    if a["attempt"] != a["number"]:
        return f"#{a['number']} (try {a['attempt']} after a requeue)"
    return f"#{a['number']}"


def timeline(
    row: dict[str, Any],
    attempts: list[dict[str, Any]],
    events: list[dict[str, Any]],
    bounces: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Creation, status changes, attempts and bounce reports, oldest first."""
    items: list[dict[str, Any]] = [
        {"at": row["created_at"], "kind": "enqueued", "text": "pending (enqueued)"}
    ]
    for e in events:
        items.append(
            {
                "at": e["at"],
                "kind": "status",
                "text": f"{e['from_status']} → {e['to_status']}",
                "detail": e["reason"] or "",
                "actor": e["actor"] or "",
            }
        )
    for a in attempts:
        items.append(
            {
                "at": a["attempted_at"],
                "kind": "attempt",
                "text": f"attempt {attempt_label(a)}: {a['verdict']} via {a['transport'] or '?'}",
                "detail": reply_text(a),
                "actor": a["worker"] or "",
            }
        )
    for b in bounces:
        verdicts = ", ".join(
            " ".join(filter(None, (r.get("class"), r.get("status"), r.get("reason"))))
            for r in b["results"]
        )
        items.append(
            {
                "at": b["received_at"],
                "kind": "bounce",
                "text": f"bounce report #{b['id']} from {b['source']} (linked by {b['link']})",
                "detail": verdicts or "no verdict",
            }
        )
    items.sort(key=lambda item: item["at"])
    return items


def reply_text(a: dict[str, Any]) -> str:
    """An attempt's reply: code, enhanced status (unless the text starts with it), text."""
    text, enhanced = a["reply_text"] or "", a["enhanced_status"]
    shown = enhanced if enhanced and not text.startswith(enhanced) else None
    return " ".join(str(x) for x in (a["reply_code"], shown, text) if x)
