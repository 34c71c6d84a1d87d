"""Webhook endpoints and the deliveries on their way to them: created,
listed, paused, disabled, enabled, their secrets rotated; the feed handed
out to them, the due deliveries read, outcomes recorded, events replayed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from outbox.db.sql import load_queries, schema
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)
DELIVERER_LOCK = 0x0B0C7  # beside the migration (0x0B0C5) and retention (0x0B0C6) locks


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An endpoint as `outbox webhooks list` shows it (the secret never)."""

    id: int
    url: str
    event_types: list[str] | None
    addresses: bool
    state: str
    state_reason: str | None
    delivered: int
    failed: int
    waiting: int  # deliveries open
    lag_seconds: float | None  # age of the oldest open event
    created_at: dt.datetime
    two_secrets: bool  # a rotated-out secret still signs


@dataclass(frozen=True, slots=True)
class LiveEndpoint:
    """An enabled endpoint as the deliverer needs it."""

    id: int
    url: str
    event_types: list[str] | None
    addresses: bool
    secret_sealed: str
    previous_sealed: str | None


@dataclass(frozen=True, slots=True)
class Due:
    """A delivery due now: its id, failed attempts so far, its email and event row."""

    id: int
    attempts: int
    outbox_id: int
    event: tuple[Any, ...]  # as outbox.events.event_body.feed_event reads it


def create_endpoint(
    conn: Conn, *, url: str, types: list[str] | None, addresses: bool, sealed: str
) -> int:
    args = {"url": url, "types": types, "addresses": addresses, "sealed": sealed}
    with translate_errors():
        row = conn.execute(queries["create_endpoint"], args).fetchone()
    assert row is not None
    return int(row[0])


def list_endpoints(conn: Conn) -> list[Endpoint]:
    with translate_errors():
        rows = conn.execute(queries["list_endpoints"]).fetchall()
    return [
        Endpoint(
            int(r[0]),
            r[1],
            r[2],
            bool(r[3]),
            r[4],
            r[5],
            int(r[6]),
            int(r[7]),
            int(r[8]),
            None if r[9] is None else float(r[9]),
            r[10],
            bool(r[11]),
        )
        for r in rows
    ]


def set_state(conn: Conn, endpoint_id: int, state: str, reason: str | None) -> bool:
    """Enable, pause or disable an endpoint; False when there is no such endpoint."""
    args = {"id": endpoint_id, "state": state, "reason": reason}
    with translate_errors():
        return conn.execute(queries["set_state"], args).fetchone() is not None


def rotate_secret(conn: Conn, endpoint_id: int, *, sealed: str, grace_seconds: float) -> bool:
    args = {"id": endpoint_id, "sealed": sealed, "grace_seconds": grace_seconds}
    with translate_errors():
        return conn.execute(queries["rotate_secret"], args).fetchone() is not None


def live_endpoints(conn: Conn) -> list[LiveEndpoint]:
    with translate_errors():
        rows = conn.execute(queries["live_endpoints"]).fetchall()
    return [LiveEndpoint(int(r[0]), r[1], r[2], bool(r[3]), r[4], r[5]) for r in rows]


def fan_out(conn: Conn, limit: int) -> int:
    """Hand up to ``limit`` new events to each endpoint; how many endpoints moved."""
    with translate_errors():
        return len(conn.execute(queries["fan_out"], {"limit": limit}).fetchall())


def due_deliveries(conn: Conn, endpoint_id: int, *, busy: Sequence[int], limit: int) -> list[Due]:
    args = {"endpoint": endpoint_id, "busy": list(busy), "limit": limit}
    with translate_errors():
        rows = conn.execute(queries["due_deliveries"], args).fetchall()
    return [Due(int(r[0]), int(r[1]), int(r[7]), tuple(r[2:7])) for r in rows]


def finish_deliveries(conn: Conn, *, delivered: Sequence[int], refused: Sequence[int]) -> None:
    """Delivered, or refused for good: the deliveries go and their endpoints count them."""
    args = {"ids": [*delivered, *refused], "delivered": list(delivered)}
    with translate_errors():
        conn.execute(queries["finish_deliveries"], args)


def retry_deliveries(conn: Conn, retries: Sequence[tuple[int, float, str]]) -> None:
    """(delivery id, delay in seconds, error) of failed attempts to try again."""
    rows = [{"id": i, "delay": delay, "error": error} for i, delay, error in retries]
    with translate_errors():
        conn.execute(queries["retry_deliveries"], {"rows": orjson.dumps(rows).decode()})


def replay(conn: Conn, endpoint_id: int, *, since: dt.datetime) -> int | None:
    """Deliver again the endpoint's events since ``since``; how many (None: no endpoint)."""
    with translate_errors():
        row = conn.execute(queries["replay"], {"id": endpoint_id, "since": since}).fetchone()
    assert row is not None
    return int(row[1]) if row[0] else None


def deliverer_lock(conn: Conn) -> bool:
    """Whether this session now holds the deliverer's lock (until it closes)."""
    with translate_errors():
        row = conn.execute(
            queries["deliverer_lock"], {"lock": DELIVERER_LOCK, "schema": schema()}
        ).fetchone()
    return bool(row and row[0])


@dataclass(frozen=True, slots=True)
class Figures:
    endpoint_id: int
    paused: bool
    delivered: int
    failed: int
    waiting: int
    lag_seconds: float


def endpoint_figures(conn: Conn) -> list[Figures]:
    with translate_errors():
        rows = conn.execute(queries["endpoint_figures"]).fetchall()
    return [
        Figures(int(r[0]), r[1] == "paused", int(r[2]), int(r[3]), int(r[4]), float(r[5]))
        for r in rows
    ]
