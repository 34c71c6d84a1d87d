"""Whose emails an API key reaches: its owner's, or every one for an operator (pure).

An owner is a service: every key of it shares its emails. The emails created
through a key are its owner's; a key reads and cancels only those, and its
idempotency keys are its owner's alone. The default owner (``None``) is the
owner of the keys made before owners existed and of every email enqueued
in-process: its keys are stored as given, as they always were. Another
owner's keys are stored under its name, ``billing␟order-3001``: the table's
one unique index then keeps each owner's keys apart, and every statement that
finds a row by its key (a repeated request, a purged key's tombstone, a
cancellation) works unchanged. U+241F cannot be part of an owner's name, and
the API refuses it in a key, so no key can be stored in another owner's
namespace; an email's owner is read back from its stored key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from outbox.validate import MAX_KEY_LENGTH

MARK = "\u241f"  # SYMBOL FOR UNIT SEPARATOR: between an owner's name and its key
DEFAULT = "default"  # the default owner's name on the command line
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # as the table's check


def checked_owner(name: str) -> str | None:
    """The owner as stored (None: the default owner), or ValueError."""
    if name == DEFAULT:
        return None
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"owner {name!r}: 1 to 64 letters, digits, '.', '_' or '-', starting with"
            " a letter or a digit (give --owner)"
        )
    return name


@dataclass(frozen=True, slots=True)
class Owner:
    name: str | None  # None: the default owner
    operator: bool = False  # reads and cancels every owner's emails

    @property
    def prefix(self) -> str:
        return "" if self.name is None else self.name + MARK

    def stored_key(self, key: str) -> str:
        """The idempotency key as stored for this owner."""
        return self.prefix + key

    def shown_key(self, stored: str) -> str:
        """A stored key as this owner gave it (another owner's, to an operator, as stored)."""
        prefix = self.prefix
        return stored[len(prefix) :] if prefix and stored.startswith(prefix) else stored

    def shown_text(self, text: str) -> str:
        """A message that quotes stored keys, with this owner's keys as it gave them."""
        return text.replace(self.prefix, "") if self.prefix else text

    def key_problem(self, key: str) -> str | None:
        """Why an idempotency key given through the API cannot be stored, if it cannot."""
        if MARK in key:
            return "must not contain U+241F (it separates an owner's name from its keys)"
        room = MAX_KEY_LENGTH - len(self.prefix)
        if len(key) > room:
            return f"is longer than {room} characters (this key's owner has {room})"
        return None

    def visible(self) -> dict[str, Any]:
        """The parameters of a query's filter to the rows this owner reaches."""
        return {"every_owner": self.operator, "owner_prefix": self.prefix, "mark": MARK}
