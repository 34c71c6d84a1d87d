"""VERP return paths that name their outbox row and cannot be forged (pure).

The envelope sender of each message is ``bounces+<id>-<signature>@<bounce
domain>``: a bounce comes back to that address, so the row is known without
parsing the bounce, and the HMAC keeps anyone from pointing a fake bounce at
an arbitrary row (and so suppressing an arbitrary address).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from outbox.bounce_parsing.verp import token_from_address as find_token_in
from outbox.token_signatures import sign, verify

PURPOSE = "verp"
LOCAL_PREFIX = "bounces"
_TOKEN = re.compile(r"([0-9a-z]{1,13})-([0-9a-f]{16})")


def return_path(outbox_id: int, *, domain: str, secret: str) -> str:
    return f"{LOCAL_PREFIX}+{token(outbox_id, secret=secret)}@{domain}"


def token(outbox_id: int, *, secret: str) -> str:
    payload = _base36(outbox_id)
    return f"{payload}-{sign(secret, PURPOSE, payload)}"


def outbox_id_from_token(value: str, *, secret: str, previous: Sequence[str] = ()) -> int | None:
    """The row a token names, or None when it is malformed or its signature is wrong."""
    match = _TOKEN.fullmatch(value.strip().lower())
    if not match or not verify(secret, PURPOSE, match.group(1), match.group(2), previous):
        return None
    return int(match.group(1), 36)


def row_token_from_address(address: str) -> str | None:
    """``bounces+TOKEN@domain`` -> ``TOKEN`` (None for any other address)."""
    return find_token_in(address, LOCAL_PREFIX)


def _base36(number: int) -> str:
    if number < 0:
        raise ValueError("outbox ids are positive")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if not number:
            return out
