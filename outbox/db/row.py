"""The row every enqueue writes: one validated email, as its columns.

Intake (:mod:`outbox.intake`) validates an email into a :class:`Row`; every
statement that writes one (insert_message, the multi-row insert, COPY, the
enqueue function of :mod:`outbox.db.enqueue_statements`) takes its columns from
:data:`COLUMNS`, so a field added here reaches every driver unchanged.
"""

from __future__ import annotations

import datetime as dt
import operator
from dataclasses import dataclass, field, fields
from typing import Any

from outbox.db.enqueue_statements import Column
from outbox.fields import files


# Not frozen: a frozen dataclass sets each of its fields through
# object.__setattr__, 2 µs per email here, and nothing changes a row once made.
@dataclass(slots=True)
class Row:
    """One validated email: its fields are the columns every statement writes.

    ``column`` metadata names a column that differs from the field (None: no
    column, kept apart), ``json`` marks JSON text stored as jsonb, ``array`` a
    tuple stored as text[]; a field added here reaches every driver.
    """

    key: str = field(metadata={"column": "idempotency_key"})
    recipient: str
    template: str
    params: str = field(metadata={"json": True})
    content_hash: str
    message_id: str
    priority: str
    template_version: str | None  # the same files on every attempt (None: inline content)
    trace_context: str | None = None  # the enqueue span's traceparent: the send joins it
    sender: str | None = None  # From: sender=, else OUTBOX_FROM, so workers need not agree
    reply_to: tuple[str, ...] = field(default=(), metadata={"array": True})  # fields.senders
    subject: str | None = None  # inline content (template '(inline)', outbox.fields.inline)
    body_text: str | None = None
    body_html: str | None = None
    # JSON [[name, value], ...] (outbox.fields.extra_headers)
    headers: str | None = field(default=None, metadata={"json": True})
    tags: tuple[str, ...] = field(default=(), metadata={"array": True})  # outbox.fields.labels
    metadata: str | None = field(default=None, metadata={"json": True})  # a JSON object
    cc: tuple[str, ...] = field(default=(), metadata={"array": True})  # fields.recipients
    bcc: tuple[str, ...] = field(default=(), metadata={"array": True})
    # outbox.fields.schedule; None: at once
    send_at: dt.datetime | None = field(default=None, metadata={"timestamp": True})
    locale: str | None = None  # the template variant used (outbox.fields.locales)
    # JSON: the files given by content (outbox.fields.files), their bytes in ``files``
    attachments: str | None = field(default=None, metadata={"json": True})
    files: tuple[files.File, ...] = field(default=(), metadata={"column": None})


COLUMNS = tuple(
    Column(
        f.name,
        f.metadata.get("column", f.name),
        f.metadata.get("json", False),
        f.metadata.get("array", False),
        f.metadata.get("timestamp", False),
    )
    for f in fields(Row)
    if f.metadata.get("column", f.name) is not None
)

_FIELDS = tuple(c.field for c in COLUMNS)
_READ = operator.attrgetter(*_FIELDS)
_ARRAYS = tuple((i, c) for i, c in enumerate(COLUMNS) if c.array)


def values(row: Row) -> tuple[Any, ...]:
    """The row's columns in COLUMNS' order, as every driver binds them
    (:meth:`outbox.db.enqueue_statements.Column.value`): made once per email, so read in
    one call, and only the array columns converted."""
    found = list(_READ(row))
    for i, column in _ARRAYS:
        found[i] = column.value(found[i])
    return tuple(found)


def named_values(row: Row) -> dict[str, Any]:
    """:func:`values` by field, for the statements with named placeholders."""
    return dict(zip(_FIELDS, values(row), strict=True))
