"""VERP token extraction.

Outbox sends each message with an envelope sender ``bounces+TOKEN@domain`` (variable
envelope return path), so a bounce arrives addressed to that address and the token
identifies the message even when the bounce itself is unreadable.  The receiving MTA
records the envelope recipient in ``Delivered-To`` / ``X-Original-To`` /
``Envelope-To``; the returned copy of the original keeps it in ``Return-Path``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from outbox.bounce_parsing import mime

DEFAULT_PREFIX = "bounces"
_ENVELOPE_HEADERS = (
    "Delivered-To",
    "X-Original-To",
    "Envelope-To",
    "X-Envelope-To",
    "X-Rcpt-To",
    "To",
)


def token_from_address(address: str, prefix: str = DEFAULT_PREFIX) -> str | None:
    """``bounces+abc123@example.com`` -> ``abc123`` (case of the token kept)."""
    pattern = re.compile(
        rf"(?<![A-Za-z0-9._-]){re.escape(prefix)}\+([A-Za-z0-9._=-]+)@[A-Za-z0-9.-]+", re.I
    )
    match = pattern.search(address)
    return match.group(1) if match else None


def find_token(values: Iterable[str], prefix: str = DEFAULT_PREFIX) -> str | None:
    for value in values:
        token = token_from_address(value, prefix)
        if token:
            return token
    return None


def token_of(msg: mime.Part, returned: mime.Part | None, extra: Iterable[str] = ()) -> str | None:
    """Token from the bounce's envelope headers, then from the returned original."""
    values: list[str] = []
    for name in _ENVELOPE_HEADERS:
        values.extend(mime.header_all(msg, name))
    values.extend(extra)
    if returned is not None:
        values.extend(mime.header_all(returned, "Return-Path"))
        values.extend(mime.header_all(returned, "Sender"))
    return find_token(values)
