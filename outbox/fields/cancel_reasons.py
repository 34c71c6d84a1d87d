"""What a cancellation may say: why, and who asked (recorded in the row's history).

Both are optional: without a reason none is recorded, and without ``by`` the
row's history names the calling application (the connection's
``application_name``, else ``application``).
"""

from __future__ import annotations

import re

from outbox.errors import InvalidMessage

MAX_REASON = 500
MAX_BY = 200
DEFAULT_BY = "application"  # who cancelled, when neither the caller nor its connection says
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_cancellation(reason: object, by: object) -> tuple[str | None, str | None]:
    """``(reason, by)`` as recorded (None: not given), or InvalidMessage."""
    return _text("reason", reason, MAX_REASON), _text("by", by, MAX_BY)


def _text(name: str, value: object, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidMessage(f"{name} must be a non-empty string when given")
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
