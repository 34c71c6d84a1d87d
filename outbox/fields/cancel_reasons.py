"""What a cancellation must say: why, and who asked (recorded in the row's history)."""

from __future__ import annotations

import re

from outbox.errors import InvalidMessage

MAX_REASON = 500
MAX_BY = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_cancellation(reason: object, by: object) -> tuple[str, str]:
    """``(reason, by)`` as recorded, or InvalidMessage."""
    return _text("reason", reason, MAX_REASON), _text("by", by, MAX_BY)


def _text(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidMessage(f"a cancellation needs {name} (a non-empty string)")
    value = value.strip()
    if _CONTROL.search(value):
        raise InvalidMessage(f"{name} contains control characters")
    if len(value) > limit:
        raise InvalidMessage(f"{name} is over {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMessage(f"{name} contains invalid Unicode") from None
    return value
