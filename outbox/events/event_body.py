"""An event as the feed and the webhooks show it, and the feed's cursor (pure).

An event's body is ``{"type", "timestamp", "data"}`` (the Standard Webhooks
payload); the feed adds its ``id`` (``evt_…``, the ``webhook-id`` of every
delivery of it) and its ``cursor``. ``data.to`` is the recipient's keyed tag
(:func:`outbox.redact.recipient_tag`) unless the reader asked for addresses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from outbox.errors import InvalidCursor
from outbox.redact import recipient_tag

# Every type an event can have, in the order the docs list them.
TYPES = (
    "email.sent",
    "email.failed",
    "email.dead",
    "email.uncertain",
    "email.bounced",
    "email.complained",
    "email.unsubscribed",
    "email.suppressed",
    "email.cancelled",
)
_CURSOR = re.compile(r"(\d{1,20})\.(\d{1,19})")
START = ("0", 0)  # before every event


@dataclass(frozen=True, slots=True)
class Position:
    """Where an event sits in the feed: its transaction's xid8, then its id."""

    xid: str
    id: int

    @property
    def cursor(self) -> str:
        return f"{self.xid}.{self.id}"


def parse_cursor(cursor: str | None) -> Position:
    """The position a cursor names; None: the feed's start."""
    if cursor is None or cursor == "":
        return Position(*START)
    match = _CURSOR.fullmatch(cursor)
    if not match or int(match.group(1)) >= 2**64 or int(match.group(2)) >= 2**63:
        raise InvalidCursor(f"cursor {cursor[:40]!r} is not one the feed gave (XID.ID)")
    return Position(str(int(match.group(1))), int(match.group(2)))


def event_id(number: int) -> str:
    return f"evt_{number}"


def event_number(text: str) -> int | None:
    """The number of an ``evt_…`` id (a plain number too); None if it is neither."""
    digits = text.removeprefix("evt_")
    return int(digits) if digits.isdigit() and len(digits) <= 18 else None


def checked_types(given: str | None) -> list[str] | None:
    """``email.sent,email.bounced`` as a list (None: every type), or ValueError."""
    if given is None or not given.strip():
        return None
    types = [t.strip() for t in given.split(",")]
    unknown = [t for t in types if t not in TYPES]
    if unknown:
        raise ValueError(f"unknown event type {unknown[0]!r}: use {', '.join(TYPES)}")
    return sorted(set(types), key=TYPES.index)


def body(fields: dict[str, Any], *, to: str, idempotency_key: str) -> dict[str, Any]:
    """The Standard Webhooks payload of one event from the feed query's fields."""
    data = {
        "id": fields["id"],
        "idempotency_key": idempotency_key,
        "message_id": fields["message_id"],
        "provider_id": fields["provider_id"],
        "status": fields["status"],
        "reason": fields["reason"],
        "tags": fields["tags"],
        "metadata": fields["metadata"],
        "to": to,
    }
    if fields.get("bounce_class"):
        data["bounce_class"] = fields["bounce_class"]
    return {"type": fields["type"], "timestamp": fields["timestamp"], "data": data}


def feed_event(
    row: tuple[Any, ...], *, secret: str, addresses: bool, shown_key: Any = None
) -> dict[str, Any]:
    """One row of the feed query as the feed shows it: id, cursor and body.

    ``shown_key`` turns the stored idempotency key into the reader's
    (an owner's prefix taken off); by default it is shown as stored.
    """
    number, xid, recipient, stored_key, fields_json = row
    fields = orjson.loads(fields_json)
    to = recipient if addresses else recipient_tag(recipient, secret=secret)
    key = shown_key(stored_key) if shown_key else stored_key
    return {
        "id": event_id(int(number)),
        "cursor": Position(str(xid), int(number)).cursor,
        **body(fields, to=to, idempotency_key=key),
    }
