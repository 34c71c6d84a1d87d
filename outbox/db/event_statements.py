"""The event feed's statement, in the neutral form every executor runs
(:mod:`outbox.db.executors`): an application reads events on its own
connection, in its own transaction, as it enqueues."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from outbox.db.enqueue_statements import Statement
from outbox.db.sql import load_queries

queries = load_queries(__name__)


def events_after(xid: str, event_id: int, *, limit: int, visible: Mapping[str, Any]) -> Statement:
    """Up to ``limit`` events after the cursor (``xid``, ``event_id``) that the
    owner ``visible`` describes reaches (:meth:`outbox.web.owners.Owner.visible`)."""
    return Statement(
        queries["events_after"], {"xid": xid, "id": event_id, "limit": limit, **visible}
    )
