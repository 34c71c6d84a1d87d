"""The metrics exporter's reads (``outbox metrics``). Each scrape is one read-only
REPEATABLE READ snapshot (:func:`connect_snapshot`); the exporter follows
three id sequences (rows, events, attempts) and reads the current gauges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, connect, translate_errors

queries = load_queries(__name__)

_METRIC_STREAMS: dict[str, tuple[LiteralString, LiteralString, LiteralString]] = {
    # stream: (ids not visible yet, ids now visible, what is new)
    "rows": (
        queries["metrics_missing_rows"],
        queries["metrics_found_rows"],
        queries["metrics_new_rows"],
    ),
    "events": (
        queries["metrics_missing_events"],
        queries["metrics_found_events"],
        queries["metrics_new_transitions"],
    ),
    "attempts": (
        queries["metrics_missing_attempts"],
        queries["metrics_found_attempts"],
        queries["metrics_new_attempts"],
    ),
}


def connect_snapshot(url: str) -> Conn:
    conn = connect(url, timeout=5)
    with translate_errors():
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
    return conn


def metrics_tops(conn: Conn) -> tuple[int, int, int, float]:
    """Highest visible id of rows, events and attempts, and the database clock."""
    with translate_errors():
        row = conn.execute(queries["metrics_tops"]).fetchone()
    assert row is not None
    return int(row[0] or 0), int(row[1] or 0), int(row[2] or 0), float(row[3])


def metrics_missing(conn: Conn, stream: str, *, low: int, high: int) -> list[int]:
    with translate_errors():
        rows = conn.execute(_METRIC_STREAMS[stream][0], {"low": low, "high": high}).fetchall()
    return [int(r[0]) for r in rows]


def metrics_found(conn: Conn, stream: str, ids: list[int]) -> list[int]:
    with translate_errors():
        rows = conn.execute(_METRIC_STREAMS[stream][1], {"ids": ids}).fetchall()
    return [int(r[0]) for r in rows]


def metrics_new(conn: Conn, stream: str, args: dict[str, Any]) -> list[tuple[Any, ...]]:
    with translate_errors():
        return [tuple(r) for r in conn.execute(_METRIC_STREAMS[stream][2], args).fetchall()]


def metrics_visible(conn: Conn, bounds: dict[str, Any]) -> tuple[int, int, int]:
    with translate_errors():
        row = conn.execute(queries["metrics_visible"], bounds).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def metrics_seed(conn: Conn) -> tuple[list[Any], list[Any], Any]:
    """Counts per status and priority, sends per minute, the last publish."""
    with translate_errors():
        last = conn.execute(queries["metrics_seed_last_publish"]).fetchone()
        counts = conn.execute(queries["metrics_seed_counts"]).fetchall()
        minutes = conn.execute(queries["metrics_seed_sent_minutes"]).fetchall()
    return list(counts), list(minutes), last[0] if last else None


def bounces_24h(conn: Conn) -> list[tuple[Any, ...]]:
    """(bounce class, rows) of the bounces and complaints of the last 24 hours."""
    with translate_errors():
        return [tuple(r) for r in conn.execute(queries["metrics_bounces_24h"]).fetchall()]


@dataclass(frozen=True, slots=True)
class MetricsCurrent:
    in_flight: list[tuple[Any, ...]]  # priority, status, count
    heads: list[tuple[Any, ...]]  # priority, oldest unsent age, oldest due age
    bounces: list[tuple[Any, ...]]  # class, count over 24 h
    reports: list[tuple[Any, ...]]  # source, outcome, count over 24 h
    suppressed: int
    breakers: list[tuple[Any, ...]]  # transport, seconds its shared breaker has been open


def metrics_current(conn: Conn, priorities: list[str]) -> MetricsCurrent:
    with translate_errors():
        in_flight = conn.execute(queries["metrics_in_flight"]).fetchall()
        heads = conn.execute(queries["metrics_heads"], {"priorities": priorities}).fetchall()
        bounces = bounces_24h(conn)
        reports = conn.execute(queries["metrics_bounce_reports_24h"]).fetchall()
        suppressed = conn.execute(queries["metrics_suppressed"]).fetchone()
        breakers = conn.execute(queries["metrics_breakers"]).fetchall()
    return MetricsCurrent(
        [tuple(r) for r in in_flight],
        [tuple(r) for r in heads],
        bounces,
        [tuple(r) for r in reports],
        int(suppressed[0]) if suppressed else 0,
        [tuple(r) for r in breakers],
    )
