"""What one metrics scrape costs on a large outbox.

    python bench/bench_metrics.py                # fills a fresh database (2M sent rows), drops it
    python bench/bench_metrics.py --keep NAME    # fills NAME once, reuses it next time

Measures the exporter's start (the one full count), a scrape with nothing
new, and a scrape after a burst of real traffic (rows enqueued, claimed, taken
and recorded with the same queries the relay and workers run), plus the status
count a naive exporter would run on every scrape.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg

from outbox import enqueue_many
from outbox.config import Settings
from outbox.db.store import migration_runner, relaying, results, sending
from outbox.telemetry.metrics_server import OutboxCollector

ADMIN_URL = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
PARAMS = (
    '{"name":"Reader","title":"What is new this month",'
    '"intro":"A short introduction paragraph for the newsletter.",'
    '"url":"https://outbox.example/news/2026-11"}'
)
# History: sent rows over the last week, 1 in 10 high priority, some bounced;
# parked rows; suppressed audit rows; a small pending queue.
FILL = [
    f"""INSERT INTO email_outbox (idempotency_key, recipient, template, params, content_hash,
        message_id, priority, status, status_reason, attempts, created_at, queued_at, sent_at,
        provider_message_id)
    SELECT 'h-' || g, 'reader' || g || '@example.com', 'newsletter', '{PARAMS}', md5(g::text),
        '<h' || g || '@outbox.localhost>', CASE WHEN g %% 10 = 0 THEN 'high' ELSE 'bulk' END,
        'sent', 'sent', 1, now() - make_interval(secs => (%(n)s - g) * 0.3 + 2),
        now() - make_interval(secs => (%(n)s - g) * 0.3 + 1),
        now() - make_interval(secs => (%(n)s - g) * 0.3), 'Q' || g
    FROM generate_series(1, %(n)s) g""",
    """INSERT INTO email_outbox (idempotency_key, recipient, template, params, content_hash,
        message_id, priority, status, status_reason, attempts, created_at, failed_at, last_error)
    SELECT 'f-' || g, 'gone' || g || '@example.com', 'newsletter', '{}', md5(g::text),
        '<f' || g || '@outbox.localhost>', CASE WHEN g %% 10 = 0 THEN 'high' ELSE 'bulk' END,
        CASE WHEN g %% 20 = 0 THEN 'dead' ELSE 'failed' END, 'x', 1,
        now() - make_interval(secs => g * 10), now() - make_interval(secs => g * 10), '550'
    FROM generate_series(1, %(n)s / 40) g""",
    """INSERT INTO email_outbox (idempotency_key, recipient, template, params, content_hash,
        message_id, priority, status, status_reason)
    SELECT 's-' || g, 'supp' || g || '@example.com', 'newsletter', '{}', md5(g::text),
        '<s' || g || '@outbox.localhost>', 'bulk', 'suppressed', 'recipient suppressed'
    FROM generate_series(1, %(n)s / 60) g""",
    """INSERT INTO email_attempt (outbox_id, attempt, verdict, stage, reply_code, reply_text,
        duration_ms, worker, attempted_at)
    SELECT id, 1, 'sent', 'final_reply', 250, '2.0.0 Ok', 12.5, 'w', sent_at
    FROM email_outbox WHERE status = 'sent'""",
    """UPDATE email_outbox SET bounced_at = sent_at + interval '1 minute',
        bounce_class = (ARRAY['hard', 'soft', 'complaint'])[id %% 3 + 1]
    WHERE status = 'sent' AND id %% 97 = 0""",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000, help="sent rows of history")
    parser.add_argument("--burst", type=int, default=10_000, help="emails between two scrapes")
    parser.add_argument("--keep", metavar="NAME", help="a database to fill once and keep")
    args = parser.parse_args()
    name = args.keep or f"outbox_bench_metrics_{uuid.uuid4().hex[:8]}"
    url = urlunsplit(urlsplit(ADMIN_URL)._replace(path=f"/{name}"))
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(url) as conn:
            migration_runner.migrate(conn)
            if not conn.execute("SELECT 1 FROM email_outbox LIMIT 1").fetchone():
                started = time.perf_counter()
                for sql in FILL:
                    conn.execute(sql.encode(), {"n": args.rows})
                conn.commit()
                conn.autocommit = True
                conn.execute("VACUUM ANALYZE email_outbox")
                conn.execute("VACUUM ANALYZE email_attempt")
                print(f"filled {args.rows:,} sent rows in {time.perf_counter() - started:.0f}s")
            total = conn.execute("SELECT count(*) FROM email_outbox").fetchone()
            print(f"email_outbox: {total[0] if total else 0:,} rows")
        run(url, args.burst)
    finally:
        if not args.keep:
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(url: str, burst: int) -> None:
    collector = OutboxCollector(url)
    started = time.perf_counter()
    collector.scrape()
    print(f"exporter start (one full count): {time.perf_counter() - started:.2f}s")
    idle = [timed(collector) for _ in range(5)]
    print(f"scrape, nothing new: median {statistics.median(idle) * 1000:.1f} ms")
    settings = Settings(database_url=url)
    for _ in range(3):
        traffic(settings, burst)
        print(f"scrape after {burst:,} emails sent: {timed(collector) * 1000:.1f} ms")
    with psycopg.connect(url) as conn:
        started = time.perf_counter()
        conn.execute("SELECT status, priority, count(*) FROM email_outbox GROUP BY 1, 2")
        print(f"for comparison, count(*) GROUP BY status: {time.perf_counter() - started:.2f}s")
    collector.close()


def timed(collector: OutboxCollector) -> float:
    started = time.perf_counter()
    collector.scrape()
    return time.perf_counter() - started


def traffic(settings: Settings, n: int) -> None:
    """Enqueue, claim, take and record ``n`` emails with the pipeline's own queries."""
    batch = uuid.uuid4().hex[:8]
    with psycopg.connect(settings.database_url) as conn:
        enqueue_many(
            conn,
            (
                {
                    "idempotency_key": f"b-{batch}-{i}",
                    "to": f"b{i}@example.com",
                    "template": "login_code",
                    "params": {"name": "A", "code": "1", "product": "P", "minutes": 1},
                    "priority": "bulk",
                }
                for i in range(n)
            ),
            settings=settings,
        )
        conn.commit()
        while claimed := relaying.claim_due(conn, priority="bulk", limit=500, relay="bench"):
            conn.commit()
            ids = [c.id for c in claimed]
            rows = sending.take_for_sending(conn, ids, "bench:1")
            conn.commit()
            records = [
                results.AttemptRecord(r.id, r.attempts, "sent", "250 ok", 0.0, "Q1", "sent",
                                    "final_reply", 250, "2.0.0", "2.0.0 Ok", 12.0)
                for r in rows
            ]  # fmt: skip
            results.record_results(conn, [("bench:1", r) for r in records])
            conn.commit()


if __name__ == "__main__":
    main()
