"""The schema and the rows' upkeep: ``outbox migrate``, ``outbox sweep``, ``outbox purge``."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any, ClassVar

from outbox.broker import broker_kind
from outbox.cli.database import connect
from outbox.cli.input import parse_duration
from outbox.cli.output import JsonResult, Printer, Result, timestamp
from outbox.config import Settings
from outbox.db.store import connections, data_retention, migration_runner, processes, relaying
from outbox.errors import BrokerError
from outbox.models import Priority
from outbox.redis_clients import redis_client
from outbox.relay.broker_watch import broker_watch
from outbox.relay.sweep_guard import why_not_sweep_sending


@dataclass(frozen=True, slots=True)
class Migrated(JsonResult):
    applied: list[str]  # the migrations' labels

    def json(self) -> Any:
        return {"applied": self.applied}

    def text(self) -> str:
        return "applied: " + ", ".join(self.applied) if self.applied else "schema is up to date"


@dataclass(frozen=True, slots=True)
class MigrationStatus(JsonResult):
    states: list[migration_runner.MigrationState]
    function_there: bool  # the enqueue function, made after the migrations
    json_indent: ClassVar[int | None] = 2

    def json(self) -> Any:
        return [
            {
                "version": m.version,
                "name": m.name,
                "applied_at": m.applied_at.isoformat() if m.applied_at else None,
            }
            for m in self.states
        ]

    def text(self) -> str:
        lines = []
        for m in self.states:
            when = f"applied {m.applied_at:%Y-%m-%d %H:%M:%S}" if m.applied_at else "pending"
            lines.append(f"{m.version:04d}_{m.name:<32} {when}")
        # After the migrations: without it enqueue works, planning each insert on psycopg2.
        lines.append(f"{'enqueue function':<37} {'there' if self.function_there else 'pending'}")
        pending = sum(1 for m in self.states if m.applied_at is None) + (not self.function_there)
        lines.append(
            f"{pending} pending: run `outbox migrate`" if pending else "schema is up to date"
        )
        return "\n".join(lines)


def migrate(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    with connect(settings) as conn:
        if args.status:
            return MigrationStatus(
                migration_runner.migration_status(conn),
                migration_runner.enqueue_function_present(conn),
            )
        applied = migration_runner.migrate(
            conn,
            lock_timeout=args.lock_timeout,
            on_wait=lambda label, n: out.note(f"{label}: waiting for traffic's locks (try {n})"),
        )
    return Migrated(applied)


@dataclass(frozen=True, slots=True)
class SweptRows(JsonResult):
    requeued_lost: int  # queued rows the broker had lost
    silent_workers_rows: dict[str, int] | int  # sending rows of silent processes, by new status

    def json(self) -> Any:
        return dataclasses.asdict(self)

    def text(self) -> str:
        return (
            f"requeued {self.requeued_lost} queued rows the broker had lost; "
            f"rows of silent worker processes: {self.silent_workers_rows}"
        )


def sweep(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    """Return lost rows once: queued ones the broker lost, sending ones of gone workers."""
    with connect(settings) as conn:
        lost = (
            _lost_queued(settings, conn, out) if broker_kind(settings.broker) == "redis" else set()
        )
        up, freshest = processes.sweep_guard(conn)
        refusal = why_not_sweep_sending(
            postgres_up_seconds=up,
            freshest_beat_seconds=freshest,
            stuck_seconds=settings.stuck_seconds,
            heartbeat_seconds=settings.heartbeat_seconds(),
        )
        if refusal and args.force:
            out.note(f"sweeping sending rows although {refusal} (--force)")
        elif refusal:
            out.note(
                f"sending rows left alone: {refusal}; sweeping them now could send live"
                " workers' emails twice. Run again once the processes beat, or with --force"
                " if every worker is known to be stopped"
            )
        swept = relaying.sweep(
            conn,
            stuck_seconds=settings.stuck_seconds,
            max_attempts=settings.max_attempts,
            hold=settings.on_uncertain == "hold",
            lost=lost,
            sending=not refusal or args.force,
        )
    return SweptRows(swept.requeued, swept.uncertain or 0)


def _lost_queued(settings: Settings, conn: connections.Conn, out: Printer) -> set[int]:
    """Queued rows Redis no longer holds (RabbitMQ's durable queues lose none)."""
    candidates = relaying.queued_ids(conn, priorities=[p.value for p in Priority], lost_after=1.0)
    if not candidates:
        return set()
    client = redis_client(settings.broker, socket_connect_timeout=5, socket_timeout=5)
    try:
        return set(candidates) - broker_watch(settings, client, list(Priority)).held_ids()
    except BrokerError as exc:
        out.note(f"queued rows left alone: {exc}")
        return set()
    finally:
        client.close()


@dataclass(frozen=True, slots=True)
class WouldPurge(JsonResult):
    count: int
    before: dt.datetime

    def json(self) -> Any:
        return {"would_purge": self.count, "before": self.before, "dry_run": True}

    def text(self) -> str:
        return (
            f"would purge {self.count} finished emails last changed before {timestamp(self.before)}"
        )


@dataclass(frozen=True, slots=True)
class PurgedEmails(JsonResult):
    purged: data_retention.Purged
    before: dt.datetime

    def json(self) -> Any:
        return {**dataclasses.asdict(self.purged), "before": self.before, "dry_run": False}

    def text(self) -> str:
        p = self.purged
        if not p.emails:
            return (
                f"no finished email last changed before {timestamp(self.before)}: nothing to purge"
            )
        return (
            f"purged {p.emails} emails, {p.attempts} attempts, {p.events} events,"
            f" {p.bounces} bounce reports; their keys stay taken"
        )


def purge(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    before = dt.datetime.now(dt.UTC) - parse_duration(args.older_than)
    with connect(settings) as conn:
        if args.dry_run:
            count = data_retention.purge_count(conn, before=before)
            connections.rollback(conn)
            return WouldPurge(count, before)
        purged = data_retention.purge(
            conn,
            before=before,
            batch=max(1, args.batch),
            on_batch=lambda done: out.progress(f"purged {done.emails} emails so far"),
        )
    return PurgedEmails(purged, before)
