"""Heartbeats of relay and worker processes (``outbox_process``): written by each
process, listed for ``outbox status`` and health, and read by the sweep's guard."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import orjson
from psycopg.rows import tuple_row

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)


def beat(conn: Conn, name: str, kind: str, detail: dict[str, Any]) -> None:
    """A relay's or worker process's heartbeat (autocommit connections: one statement)."""
    args = {"name": name, "kind": kind, "detail": orjson.dumps(detail).decode()}
    with translate_errors():
        conn.execute(queries["beat"], args)


def forget_process(conn: Conn, name: str) -> None:
    with translate_errors():
        conn.execute(queries["forget_process"], {"name": name})


@dataclass(frozen=True, slots=True)
class ProcessBeat:
    name: str
    kind: str
    detail: dict[str, Any]
    started_at: dt.datetime
    silent_seconds: float


def sweep_guard(conn: Conn) -> tuple[float, float | None]:
    """(seconds Postgres has run, age of the freshest process heartbeat or None)."""
    with translate_errors():
        row = conn.execute(queries["sweep_guard"]).fetchone()
    assert row is not None
    return float(row[0]), None if row[1] is None else float(row[1])


def list_processes(conn: Conn) -> list[ProcessBeat]:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        return [ProcessBeat(*r) for r in cur.execute(queries["list_processes"]).fetchall()]
