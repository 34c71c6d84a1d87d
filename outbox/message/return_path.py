"""Addresses of the bounce domain that name their outbox row and cannot be
forged (pure).

Two kinds of token travel in a message, each under its own HMAC key, so one
can never be passed off as the other:

- the **bounce** token, in the envelope sender (``bounces+b.<id>-<sig>@<bounce
  domain>``): a bounce comes back to it, so the row is known without parsing the
  bounce, and the HMAC keeps anyone from pointing a made-up bounce at an
  arbitrary row (and so suppressing an arbitrary address);
- the **unsubscribe** token, in a newsletter's ``List-Unsubscribe`` mailto
  (``bounces+u.<id>-<sig>@…``): that header is shown to readers and copied
  wherever the message goes, so what arrives there may unsubscribe and no more.

The previous release signed one token, ``bounces+<id>-<sig>``, for both places;
those still verify, as kind ``previous`` (what they may do:
:mod:`outbox.bounce_receiving.policy`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from outbox.bounce_parsing.verp import token_from_address as find_token_in
from outbox.token_signatures import sign, verify

Kind = Literal["bounce", "unsubscribe", "previous"]
LOCAL_PREFIX = "bounces"
# Each kind's own key: a signature made for one kind verifies for no other.
_PURPOSES: dict[Kind, str] = {
    "bounce": "verp-bounce",
    "unsubscribe": "verp-unsubscribe",
    "previous": "verp",
}
_MARKS: dict[str, Kind] = {"b": "bounce", "u": "unsubscribe", "": "previous"}
_TOKEN = re.compile(r"(?:([bu])\.)?([0-9a-z]{1,13})-([0-9a-f]{16})")


@dataclass(frozen=True, slots=True)
class RowToken:
    outbox_id: int
    kind: Kind


def return_path(outbox_id: int, *, domain: str, secret: str) -> str:
    """The envelope sender: where the bounces of this row come back."""
    return f"{LOCAL_PREFIX}+{token(outbox_id, secret=secret)}@{domain}"


def unsubscribe_mailto(outbox_id: int, *, domain: str, secret: str) -> str:
    """The List-Unsubscribe mailto of a newsletter row: good for unsubscribing only."""
    return f"{LOCAL_PREFIX}+{token(outbox_id, secret=secret, kind='unsubscribe')}@{domain}"


def token(outbox_id: int, *, secret: str, kind: Kind = "bounce") -> str:
    mark = next(m for m, k in _MARKS.items() if k == kind)
    payload = f"{mark}.{_base36(outbox_id)}" if mark else _base36(outbox_id)
    return f"{payload}-{sign(secret, _PURPOSES[kind], payload)}"


def read_token(value: str, *, secret: str, previous: Sequence[str] = ()) -> RowToken | None:
    """The row and kind a token names, or None when it is malformed or its signature is wrong."""
    match = _TOKEN.fullmatch(value.strip().lower())
    if not match:
        return None
    mark, number, signature = match.group(1) or "", match.group(2), match.group(3)
    kind = _MARKS[mark]
    payload = f"{mark}.{number}" if mark else number
    if not verify(secret, _PURPOSES[kind], payload, signature, previous):
        return None
    return RowToken(int(number, 36), kind)


def outbox_id_from_token(value: str, *, secret: str, previous: Sequence[str] = ()) -> int | None:
    """The row a token of any kind names, or None (see :func:`read_token`)."""
    found = read_token(value, secret=secret, previous=previous)
    return found.outbox_id if found else None


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
