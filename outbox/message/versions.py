"""Template versions kept in Postgres, so a retry renders what the first attempt would have.

Enqueue records the version (a hash) on the row. Before the first row that
names a version is written, the version itself (files and compiled parts) is
committed to ``email_template_version`` on a short connection of its own,
once per process and version. It is committed, not merely written in the
caller's transaction, so that "already stored" can be cached: a caller that
rolls back leaves at worst an unused version row, never a row naming a
version that is missing. Enqueue itself stays one statement.

At send time a row whose version differs from the directory's current one is
rendered from the stored version (fetched once per process and version).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from outbox.db import store
from outbox.db.store import Conn
from outbox.errors import TemplateError, UnknownTemplate
from outbox.message.render import Template, TemplateSet

_stored: set[tuple[bytes, bytes, bytes, str]] = set()  # database and version, committed
_lock = threading.Lock()


def ensure_stored(conn: Conn, template: Template) -> None:
    """Commit ``template``'s version to the database ``conn`` is connected to, once."""
    pgconn = conn.pgconn  # libpq's own fields: conn.info.dsn costs most of a millisecond
    key = (pgconn.host, pgconn.port, pgconn.db, template.version)
    if key in _stored:
        return
    with _lock:
        if key in _stored:
            return
        store.store_template_version(
            conn,
            version=template.version,
            name=template.name,
            files=dict(template.files),
            compiled_html=template.compiled_html,
            compiled_text=template.compiled_text,
        )
        _stored.add(key)


def resolve(
    templates: TemplateSet,
    name: str,
    version: str | None,
    connect: Callable[[], AbstractContextManager[Conn]],
    variant: str | None = None,
) -> Template:
    """The template a row was enqueued with; ``connect`` is used only for an older version."""
    if version is None:  # enqueued before versions were recorded
        return templates.get(name)
    known = templates.cached_version(version)
    if known is not None:
        return known
    try:
        current = templates.get(name, variant)
    except (UnknownTemplate, TemplateError):
        current = None  # gone or broken now; the stored version still renders
    if current is not None and current.version == version:
        return current
    with connect() as conn:
        row = store.find_template_version(conn, version)
    if row is None:
        raise TemplateError(f"template {name!r} version {version} is not stored")
    return templates.from_stored(row[0], version, row[1], row[2], row[3])
