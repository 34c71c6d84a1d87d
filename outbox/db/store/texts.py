"""Texts as Postgres text and jsonb columns can hold them (pure): replies, reports
and reasons written by others, kept readable rather than failing their statement."""

from __future__ import annotations

from typing import Any


def plain(value: str | None) -> bool:
    """A text every column holds as it is: :func:`storable_text` leaves it alone."""
    return value is None or (value.isascii() and "\x00" not in value)


def storable_text(value: str | None) -> str | None:
    """``value`` as a text or jsonb column can hold it.

    Postgres refuses NUL in text and ``\\u0000`` in jsonb, and lone surrogates
    (what decoding invalid UTF-8 with ``surrogateescape`` leaves) are no UTF-8
    at all: each becomes U+FFFD, so a hostile reply or report is kept, readable,
    instead of failing the statement that records it.
    """
    if value is None or plain(value):
        return value
    raw = value.encode("utf-8", "surrogatepass")  # a lone surrogate: three invalid bytes
    return raw.decode("utf-8", "replace").replace("\x00", "\ufffd")


def storable(value: Any) -> Any:
    """:func:`storable_text` applied to every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(str(k)): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value
