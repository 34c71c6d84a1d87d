"""Template versions kept in Postgres, so a retry renders what the first attempt would have.

Enqueue records the version (a hash) on the row, and stores the version
itself (files and compiled parts) in ``email_template_version`` by a
statement of the same transaction, on the caller's connection whatever its
driver: the row and the version it names commit together or not at all.

The process remembers a version as stored in a database only once a later
statement finds it already there (``ON CONFLICT DO NOTHING`` wrote nothing),
which proves a commit: a caller that rolls back leaves no memory of a version
that is missing. So each process sends a version's files at most a few times
per database. The price of storing in the caller's transaction: two
transactions that enqueue the first rows of one new version at once wait for
each other's commit on its primary key, once.

At send time a row whose version differs from the directory's current one is
rendered from the stored version (fetched once per process and version).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager

from outbox.db import enqueue_statements
from outbox.db.store import connections, sending
from outbox.errors import TemplateError, UnknownTemplate
from outbox.message.render import Template, TemplateSet

# Committed versions: by database where the driver names it without a round trip,
# else by connection (a connection always talks to the same database).
_by_database: set[tuple[Hashable, str]] = set()
_by_connection: weakref.WeakKeyDictionary[object, set[str]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def is_stored(database: object, version: str) -> bool:
    """Whether ``version`` is known to be committed where ``database`` points.

    ``database`` is a tuple naming the database, or the connection object itself.
    """
    if isinstance(database, tuple):
        return (database, version) in _by_database
    return version in _by_connection.get(database, ())


def store_statement(template: Template) -> enqueue_statements.Statement:
    """The statement that keeps ``template``'s version (run it in the caller's transaction)."""
    return enqueue_statements.store_template_version(
        version=template.version,
        name=template.name,
        files=template.files,
        compiled_html=template.compiled_html,
        compiled_text=template.compiled_text,
    )


def stored(database: object, version: str, *, written: bool) -> None:
    """Note the outcome of :func:`store_statement`: found already there means committed."""
    if written:
        return  # ours, uncommitted: the caller may still roll back
    with _lock:
        if isinstance(database, tuple):
            _by_database.add((database, version))
        else:
            _by_connection.setdefault(database, set()).add(version)


def resolve(
    templates: TemplateSet,
    name: str,
    version: str | None,
    connect: Callable[[], AbstractContextManager[connections.Conn]],
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
        row = sending.find_template_version(conn, version)
    if row is None:
        raise TemplateError(f"template {name!r} version {version} is not stored")
    return templates.from_stored(row[0], version, row[1], row[2], row[3])
