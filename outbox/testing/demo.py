"""``outbox demo``: a login code and a newsletter through the real pipeline.

It starts a recording SMTP server on loopback, enqueues the emails in one
transaction, runs the relay and both worker pools as child processes, waits
until every email has an outcome, prints what happened, and stops.

Everything it writes goes to a schema of its own (``outbox_demo_<run>``, its
OUTBOX_SCHEMA, the tables migrated there), dropped at the end, so the database it is pointed at
keeps nothing of it; ``--keep`` keeps the schema and prints how to look at it. Its
keys in Redis (its own OUTBOX_NAMESPACE: the workers' heartbeats, the relay's
epoch, pacing) are deleted at the end either way: nothing reads them after it.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
import uuid

from outbox.config import Settings
from outbox.db.sql import use_schema
from outbox.db.store import connections, counts, lookups, migration_runner
from outbox.intake import enqueue, enqueue_many
from outbox.testing.pipeline import Pipeline
from outbox.testing.redis_keys import drop_namespace
from outbox.testing.sink import SmtpSink

TERMINAL = {"sent", "failed", "dead", "held"}


def run_demo(settings: Settings, *, newsletter: int, timeout: float, keep: bool = False) -> int:
    run = f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    schema = "outbox_demo_" + run.removeprefix("demo-").replace("-", "_")
    try:
        with use_schema(schema):  # OUTBOX_SCHEMA, for this process and its children
            status, login_message_id = _run(
                dataclasses.replace(settings, schema=schema), run, newsletter, timeout
            )
    finally:
        try:
            _drop_keys(settings, run)
        finally:
            if not keep:
                with connections.connect(settings.database_url) as conn:
                    migration_runner.drop_schema(conn, schema)
    _next_steps(login_message_id, schema, kept=keep)
    return status


def _drop_keys(settings: Settings, run: str) -> None:
    """Delete the run's keys from Redis: its namespace is its own."""
    for pattern in drop_namespace(settings, run):
        print(f"the demo's keys in Redis were left: {pattern}")


def _next_steps(login_message_id: str | None, schema: str, *, kept: bool) -> None:
    if login_message_id:
        print(f"the login code's Message-ID: {login_message_id}")
    if not kept:
        print(f"schema {schema} dropped: the database keeps nothing of the demo (--keep keeps it)")
        print("next, try:")
        print("  outbox templates preview login_code    # the email as the worker builds it")
        print("  outbox demo --keep                     # then look at the emails it sent")
        print("  outbox config check                    # what each process needs to start")
        return
    print(f"kept in schema {schema}; point the commands at it with:")
    print(f"  export OUTBOX_SCHEMA={schema}")
    print("next, try:")
    if login_message_id:
        print(f"  outbox show '{login_message_id}'   # its attempts and status changes")
    print("  outbox status                          # counts and each part's health")
    print("  outbox requeue --dead --dry-run        # what a requeue would send again")
    print(
        f"  unset OUTBOX_SCHEMA; psql \"$DATABASE_URL\" -c 'DROP SCHEMA {schema} CASCADE'"
        "  # when done"
    )


def _run(settings: Settings, run: str, newsletter: int, timeout: float) -> tuple[int, str | None]:
    with connections.connect(settings.database_url) as conn:
        migration_runner.migrate(conn)
    with SmtpSink() as sink:
        env = {
            "DATABASE_URL": settings.database_url,
            "OUTBOX_SCHEMA": settings.schema,  # the demo's own schema
            "SMTP_URL": sink.url,
            "OUTBOX_NAMESPACE": run,  # a broker namespace of its own
            "OUTBOX_LOG_LEVEL": os.environ.get("OUTBOX_LOG_LEVEL", "WARNING"),
        }
        with Pipeline(env, high=(1, 4), bulk=(1, 8), split_relays=True):
            started = time.monotonic()
            with connections.connect(settings.database_url) as conn:
                enqueue_many(
                    conn,
                    (
                        {
                            "idempotency_key": f"{run}-newsletter-{i}",
                            "to": f"reader{i}@example.com",
                            "template": "newsletter",
                            "params": {
                                "name": f"Reader {i}",
                                "title": "What is new in Outbox",
                                "intro": "Every email leaves exactly once.",
                                "url": "https://outbox.example/news",
                            },
                        }
                        for i in range(newsletter)
                    ),
                    settings=settings,
                )
                connections.commit(conn)
                # The login code arrives while the newsletter is draining.
                deadline = time.monotonic() + timeout
                while len(sink.messages) < min(50, newsletter) and time.monotonic() < deadline:
                    time.sleep(0.01)
                waiting = newsletter - len(sink.messages)
                login = enqueue(
                    conn,
                    idempotency_key=f"{run}-login-code",
                    to="alice@example.com",
                    template="login_code",
                    params={"name": "Alice", "code": "482913", "product": "Outbox", "minutes": 10},
                    priority="high",
                    settings=settings,
                )
                connections.commit(conn)
            print(
                f"run {run}: enqueued a {newsletter}-recipient newsletter, then a login code"
                f" while {waiting} newsletter emails were still waiting"
            )
            per_status = _wait(settings, run, newsletter + 1, timeout)
            elapsed = time.monotonic() - started
    with connections.connect(settings.database_url) as conn:
        sent = lookups.sent_by_prefix(conn, run)
    _report(per_status, sent, sink, login.message_id, elapsed)
    delivered = {m.message_id for m in sink.messages}
    ok = per_status.get("sent", 0) == newsletter + 1 and login.message_id in delivered
    return (0 if ok else 1), login.message_id


def _wait(settings: Settings, run: str, total: int, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    with connections.connect(settings.database_url, autocommit=True) as conn:
        while True:
            per_status: dict[str, int] = collections.Counter()
            for status, _priority, count in counts.status_counts_by_prefix(conn, run):
                per_status[status] += count
            done = sum(n for s, n in per_status.items() if s in TERMINAL)
            if done >= total or time.monotonic() > deadline:
                return dict(per_status)
            time.sleep(0.2)


def _report(
    per_status: dict[str, int],
    sent: list[dict[str, object]],
    sink: SmtpSink,
    login_message_id: str,
    elapsed: float,
) -> None:
    print(f"finished in {elapsed:.1f}s")
    print("emails per status: " + ", ".join(f"{s}={n}" for s, n in sorted(per_status.items())))
    print(f"messages at the SMTP server: {len(sink.messages)}")
    login = next((r for r in sent if r["message_id"] == login_message_id), None)
    arrival = 1 + sink.message_ids().index(login_message_id) if login else 0
    if login:
        latency_ms = float(login["latency"]) * 1000  # type: ignore[arg-type]  # a float column
        print(
            f"login code delivered {latency_ms:.0f} ms after its commit; "
            f"it was message {arrival} of {len(sink.messages)} at the SMTP server"
        )
    print("a few delivered Message-IDs (with the relay's queue id):")
    for row in sent[:3] + sent[-2:]:
        print(f"  {row['priority']:<4} {row['message_id']}  {row['provider_message_id']}")
