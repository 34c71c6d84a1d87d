"""Tags and metadata: labels an application attaches to an email to find and count it.

Neither reaches the message itself. Both are stored with the row, shown by
``outbox show``, set on the email's spans and passed to providers that take
them (Postmark's Tag and Metadata, Resend's and SES's tags). The limits are
the strictest of those APIs, so a label that passes here passes there:
tags and metadata keys are ASCII letters, digits, ``_`` and ``-`` (Resend,
SES); at most 10 metadata fields, keys up to 20 characters and values up to
80 (Postmark).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from outbox.errors import InvalidField

MAX_TAGS = 10
MAX_TAG = 64
MAX_METADATA = 10
MAX_KEY = 20
MAX_METADATA_VALUE = 80
_LABEL = re.compile(r"[A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_tags(tags: object) -> tuple[str, ...]:
    """Tags as stored: unique, in the order given."""
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, list | tuple):
        raise InvalidField("tags must be a list of strings")
    if len(tags) > MAX_TAGS:
        raise InvalidField(f"tags has {len(tags)} entries, over {MAX_TAGS}")
    for tag in tags:
        if not isinstance(tag, str) or not tag:
            raise InvalidField("each tag must be a non-empty string")
        if len(tag) > MAX_TAG or not _LABEL.fullmatch(tag):
            raise InvalidField(
                f"tag {tag[:40]!r} must be up to {MAX_TAG} ASCII letters, digits, _ or -"
            )
    return tuple(dict.fromkeys(tags))


def check_metadata(metadata: object) -> dict[str, str | int | float | bool]:
    """Metadata as stored: a flat object of short keys and short plain values."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidField("metadata must be a mapping (a JSON object)")
    if len(metadata) > MAX_METADATA:
        raise InvalidField(f"metadata has {len(metadata)} keys, over {MAX_METADATA}")
    checked: dict[str, str | int | float | bool] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or len(key) > MAX_KEY or not _LABEL.fullmatch(key):
            raise InvalidField(
                f"metadata key {str(key)[:40]!r} must be up to {MAX_KEY} ASCII letters, "
                "digits, _ or -"
            )
        checked[key] = _value(key, value)
    return checked


def as_text(value: str | int | float | bool) -> str:
    """A metadata value as the providers' string fields take it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _value(key: str, value: object) -> str | int | float | bool:
    if isinstance(value, bool | int):
        if not isinstance(value, bool) and abs(value) >= 2**53:
            raise InvalidField(f"metadata {key!r} is an integer too large for JSON readers")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidField(f"metadata {key!r} is NaN or Infinity, which JSON cannot hold")
        return value
    if not isinstance(value, str):
        raise InvalidField(f"metadata {key!r} must be a string, number or boolean")
    if _CONTROL.search(value):
        raise InvalidField(f"metadata {key!r} contains control characters")
    if len(as_text(value)) > MAX_METADATA_VALUE:
        raise InvalidField(f"metadata {key!r} is over {MAX_METADATA_VALUE} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidField(f"metadata {key!r} contains invalid Unicode") from None
    return value
