"""The event feed, read on the application's own connection.

An application that stores the last cursor in the same transaction as its
reaction to the events before it acts on each event exactly once: the cursor
and the reaction commit together or not at all. :func:`read_events` runs in
the caller's transaction and never commits, on every connection
:func:`outbox.enqueue` takes; ``GET /v1/events`` serves the same events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from outbox.config import Settings, default_settings
from outbox.db import async_executors, event_statements, executors
from outbox.db.enqueue_statements import Plan
from outbox.events.event_body import feed_event, parse_cursor

MAX_LIMIT = 1000
# Every owner's events (the mark is unused then: U+241F, as outbox.web.owners).
EVERY_OWNER = {"every_owner": True, "owner_prefix": "", "mark": "\u241f"}


def read_events(
    conn: Any,
    after: str | None = None,
    limit: int = 100,
    *,
    addresses: bool = False,
    settings: Settings | None = None,
) -> list[dict[str, Any]]:
    """Up to ``limit`` events after the cursor ``after`` (None: from the first), in order.

    Each is ``{"id", "cursor", "type", "timestamp", "data"}``; store the last
    one's ``cursor`` and pass it as ``after`` next time. ``data.to`` is the
    recipient's keyed tag (OUTBOX_SECRET), the address itself with
    ``addresses=True``. Every owner's events are read. An event appears once
    the transaction that wrote it and every transaction older than it have
    ended, so a cursor never passes an event that commits later.
    """
    plan = _plan(
        after, limit, EVERY_OWNER, _shown((settings or default_settings()).secret, addresses, None)
    )
    return executors.run(plan, executors.executor_for(conn))


async def read_events_async(
    conn: Any,
    after: str | None = None,
    limit: int = 100,
    *,
    addresses: bool = False,
    settings: Settings | None = None,
) -> list[dict[str, Any]]:
    """:func:`read_events` for asynchronous code (the connections of ``enqueue_async``)."""
    plan = _plan(
        after, limit, EVERY_OWNER, _shown((settings or default_settings()).secret, addresses, None)
    )
    return await async_executors.run(plan, await async_executors.executor_for(conn))


Shown = Callable[[tuple[Any, ...]], dict[str, Any]]


def _shown(secret: str, addresses: bool, shown_key: Callable[[str], str] | None) -> Shown:
    def shown(row: tuple[Any, ...]) -> dict[str, Any]:
        return feed_event(row, secret=secret, addresses=addresses, shown_key=shown_key)

    return shown


def read_owner_events(
    conn: Any,
    after: str | None,
    limit: int,
    *,
    visible: Mapping[str, Any],
    secret: str,
    shown_key: Callable[[str], str],
) -> list[dict[str, Any]]:
    """The feed as one owner reaches it (``GET /v1/events``): its emails' events
    only, their keys as it gave them, ``to`` as the keyed tag."""
    plan = _plan(after, limit, visible, _shown(secret, False, shown_key))
    return executors.run(plan, executors.executor_for(conn))


def _plan(
    after: str | None, limit: int, visible: Mapping[str, Any], shown: Shown
) -> Plan[list[dict[str, Any]]]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    position = parse_cursor(after)
    rows = yield event_statements.events_after(
        position.xid, position.id, limit=limit, visible=visible
    )
    return [shown(row) for row in rows]
