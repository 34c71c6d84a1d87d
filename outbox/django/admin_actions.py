"""What the Django admin does to Outbox, through the same store functions as the
console: find emails by their names (key, ids, Message-ID, provider id,
address through its keyed hash), requeue, cancel, suppress and unsuppress,
each written to ``console_audit`` with the Django user, in the action's own
transaction.

The store speaks psycopg 3; Django may be on psycopg2. So each call opens a
connection of its own to Django's database (its ``DATABASES`` entry): the
action and its audit row commit together, as the console's do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from outbox import cancelling
from outbox.db.store import connections, console_reads, console_sessions, requeues, suppressions
from outbox.errors import InvalidAddress
from outbox.validate import normalize_address

ROLE = "django-admin"  # the audit's role of a Django user
PARKED = ("failed", "dead", "held")  # what a requeue sends again
MAX_FOUND = 500  # emails one search finds


@contextlib.contextmanager
def own_connection(using: str | None = None) -> Iterator[connections.Conn]:
    """A psycopg 3 connection to Django's database ``using``, committed at the end."""
    from django.db import DEFAULT_DB_ALIAS  # noqa: PLC0415  # Django's settings are loaded
    from django.db import connections as django_connections  # noqa: PLC0415

    db = django_connections[using or DEFAULT_DB_ALIAS].settings_dict
    conn = connections.connect_params(
        dbname=db.get("NAME") or None,
        user=db.get("USER") or None,
        password=db.get("PASSWORD") or None,
        host=db.get("HOST") or None,
        port=str(db["PORT"]) if db.get("PORT") else None,
    )
    with conn:
        yield conn
        connections.commit(conn)


def found_ids(search: str, *, using: str | None = None) -> list[int]:
    """The emails a search names: key, row id, Message-ID, provider id, or an
    address (through its keyed hash, as the console finds it)."""
    ref = search.strip()
    if not ref:
        return []
    with own_connection(using) as conn:
        rows = console_reads.console_find(conn, ref, limit=MAX_FOUND)
        address = _address(ref)
        if address is not None:
            rows += console_reads.console_find_to(conn, address, before=None, limit=MAX_FOUND)
    return sorted({int(r["id"]) for r in rows}, reverse=True)


def _address(text: str) -> str | None:
    if "@" not in text:
        return None
    try:
        return normalize_address(text).lower()
    except InvalidAddress:
        return None


def _audit(
    conn: connections.Conn,
    user: str,
    *,
    action: str,
    target: str,
    reason: str,
    detail: dict[str, Any],
) -> None:
    console_sessions.console_audit_add(
        conn, actor=user, role=ROLE, action=action, target=target, reason=reason, detail=detail
    )


def requeue(user: str, emails: Iterable[Any], reason: str, *, using: str | None = None) -> int:
    """Requeue each parked email; returns how many went back to pending."""
    done = 0
    with own_connection(using) as conn:
        for e in emails:
            woken = requeues.requeue_row(conn, e.id) if e.status in PARKED else []
            done += len(woken)
            _audit(conn, user, action="requeue", target=_target(e), reason=reason,
                   detail={"from_status": e.status, "requeued": len(woken)})  # fmt: skip
    return done


def cancel(user: str, emails: Iterable[Any], reason: str, *, using: str | None = None) -> int:
    """Cancel each email no worker has taken yet; returns how many were cancelled."""
    done = 0
    with own_connection(using) as conn:
        for e in emails:
            result = cancelling.cancel(conn, e.idempotency_key, reason=reason, by=f"django:{user}")
            done += result.cancelled
            _audit(conn, user, action="cancel", target=_target(e), reason=reason,
                   detail={"from_status": e.status, "cancelled": result.cancelled})  # fmt: skip
    return done


def suppress(
    user: str, addresses: Iterable[str], reason: str, *, tag: Any, using: str | None = None
) -> int:
    """Suppress each address for all mail; ``tag`` names it in the audit."""
    done = 0
    with own_connection(using) as conn:
        for address in {a.lower() for a in addresses}:
            changed = suppressions.suppress(
                conn, address, reason="manual", scope="all", detail=reason
            )
            done += changed
            _audit(conn, user, action="suppression-add", target=tag(address), reason=reason,
                   detail={"changed": changed})  # fmt: skip
    return done


def unsuppress(
    user: str, addresses: Iterable[str], reason: str, *, tag: Any, using: str | None = None
) -> int:
    done = 0
    with own_connection(using) as conn:
        for address in addresses:
            changed = suppressions.unsuppress(conn, address)
            done += changed
            _audit(conn, user, action="suppression-remove", target=tag(address), reason=reason,
                   detail={"changed": changed})  # fmt: skip
    return done


def _target(e: Any) -> str:
    return f"email {e.id} ({e.idempotency_key})"
