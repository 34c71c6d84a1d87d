"""Scheduled sending: the moment an email may leave, given at enqueue."""

from __future__ import annotations

import datetime as dt

from outbox.errors import InvalidMessage


def check_send_at(value: object) -> dt.datetime | None:
    """``send_at`` as stored (UTC), or InvalidMessage.

    It must be a timezone-aware datetime: a naive one means a different
    moment on every server that reads it. A time in the past sends at once.
    """
    if value is None:
        return None
    if not isinstance(value, dt.datetime):
        raise InvalidMessage("send_at must be a datetime with a timezone")
    offset = value.utcoffset()
    if offset is None:
        raise InvalidMessage(
            "send_at is a naive datetime: give its timezone (datetime.now(datetime.UTC) + ...)"
        )
    return value.astimezone(dt.UTC)
