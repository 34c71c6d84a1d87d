"""The commands' connection to Postgres, and what to do when there is none."""

from __future__ import annotations

import re

from outbox.config import Settings
from outbox.db.store import connections
from outbox.errors import OutboxError, StoreError
from outbox.preflight import database_url_problem


def connect(settings: Settings) -> connections.Conn:
    """A connection to DATABASE_URL; :class:`OutboxError` says in one line what is wrong."""
    problem = database_url_problem(settings.database_url)
    if problem:
        raise OutboxError(problem)
    try:
        return connections.connect(settings.database_url)
    except StoreError as exc:
        raise OutboxError(connect_failure(str(exc.__cause__))) from exc


def connect_failure(said: str) -> str:
    """What to do about a failed connection, in one line."""
    said = " ".join(said.split())
    missing = re.search(r'database "([^"]+)" does not exist', said)
    if missing:
        name = missing.group(1)
        return (
            f'database "{name}" does not exist on the server DATABASE_URL names: '
            f"create it (`createdb {name}`), then run `outbox migrate`"
        )
    return f"cannot reach Postgres at DATABASE_URL ({said}); start it or set DATABASE_URL"
