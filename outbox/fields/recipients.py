"""Cc and bcc: a few more recipients of the same message, under one Message-ID.

Each address is checked like ``to`` and kept in its ASCII form (an IDNA
A-label domain): a Cc header with a UTF-8 address, or a bcc RCPT with one,
would need SMTPUTF8 from the relay for the whole message. An address given
twice, or equal to ``to``, is kept once, in the first place it appears
(to, then cc, then bcc). The message has at most :data:`MAX_RECIPIENTS`
recipients in all, ``to`` included: one row is one send, and a list is a
newsletter (``enqueue_many``), not a long Cc line.
"""

from __future__ import annotations

from outbox.errors import InvalidAddress
from outbox.validate import ascii_address, normalize_address

MAX_RECIPIENTS = 10  # to, cc and bcc together


def check_copies(to: str, cc: object, bcc: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The cc and bcc addresses as stored, or InvalidAddress / HeaderInjection."""
    seen = {to.lower()}
    checked: list[list[str]] = []
    for field, value in (("cc", cc), ("bcc", bcc)):
        kept: list[str] = []
        for address in _listed(field, value):
            folded = address.lower()
            if folded not in seen:
                seen.add(folded)
                kept.append(address)
        checked.append(kept)
    if len(seen) > MAX_RECIPIENTS:
        raise InvalidAddress(
            f"the email has {len(seen)} recipients (to, cc and bcc), over {MAX_RECIPIENTS}"
        )
    return tuple(checked[0]), tuple(checked[1])


def _listed(field: str, value: object) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise InvalidAddress(f"{field} must be an address or a list of addresses")
    found = []
    for item in items:
        try:
            address = normalize_address(item)
        except InvalidAddress as exc:
            raise type(exc)(f"{field}: {exc}") from None
        ascii_form = address if address.isascii() else ascii_address(address)
        if ascii_form is None:
            raise InvalidAddress(
                f"{field}: a local part that is not ASCII needs SMTPUTF8 for the whole message"
            )
        found.append(ascii_form)
    return found
