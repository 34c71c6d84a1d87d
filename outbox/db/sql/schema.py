"""Naming the outbox's tables and functions in a schema of their own (OUTBOX_SCHEMA).

The named queries (each module's ``.sql`` file) and the migrations name their
objects bare, so a database with the outbox in its ``search_path``
(``public``, usually) needs nothing. With a schema set, every name of ours is
qualified in the text itself, ``"billing".email_outbox``, rather than by a
``search_path``: enqueue runs on the application's own connection, whose
``search_path`` is the application's business, and PgBouncer in transaction
mode neither keeps a ``SET search_path`` to one client nor passes a startup
``options`` on.

Pure text handling: :func:`qualify` is applied once per query and schema.
"""

from __future__ import annotations

import re

# Every table and function the migrations create. A unit test compares this
# list with the migrations, so a new table cannot be left out.
TABLES = frozenset(
    {
        "console_audit",
        "console_session",
        "domain_check",
        "email_attachment_blob",
        "email_attachment_use",
        "email_attempt",
        "email_bounce",
        "email_event",
        "email_key_tombstone",
        "email_outbox",
        "email_suppression",
        "email_template_version",
        "outbox_api_key",
        "outbox_breaker",
        "outbox_event",
        "outbox_process",
        "outbox_schema_migration",
        "webhook_delivery",
        "webhook_endpoint",
    }
)
FUNCTIONS = frozenset(
    {
        "email_address_hash",
        "email_key_hash",
        "email_outbox_record_update",
        "email_outbox_release_attachments",
        "email_recipient_hash",
        "outbox_event_horizon",
        "outbox_event_record",
    }
)

# A name of ours as a whole word, unless already qualified ("x.name") or
# quoted; inside string literals too: 'email_outbox'::regclass and the
# CREATE FUNCTION text a migration builds with format() need the schema as well.
_OBJECT = re.compile(
    r"(?<![\w.\"])(" + "|".join(sorted(TABLES | FUNCTIONS, key=len, reverse=True)) + r")(?![\w\"])"
)
# An index is named bare where it is created (it lives in its table's schema)
# and qualified where it is dropped.
_DROP_INDEX = re.compile(
    r"(\bDROP\s+INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+EXISTS\s+)?)([a-z_][a-z0-9_]*)",
    re.IGNORECASE,
)


def qualify(sql: str, schema: str) -> str:
    """``sql`` with each of our objects named in ``schema``; unchanged when it is empty."""
    if not schema:
        return sql
    prefix = f'"{schema}".'
    sql = _OBJECT.sub(lambda m: prefix + m.group(1), sql)
    return _DROP_INDEX.sub(lambda m: m.group(1) + prefix + m.group(2), sql)
