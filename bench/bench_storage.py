"""Bytes kept per email before and after `outbox purge`, and what the purge costs enqueues.

A scratch database gets ``--emails`` sent emails as a worker leaves them: the
row with its params, one attempt with the relay's reply, the three status
changes (queued, sending, sent). Their bytes (heap, indexes, TOAST of every
outbox table) are measured, then everything is purged while one thread enqueues
all the time, then the tables are compacted (VACUUM FULL, which a plain VACUUM
only makes reusable) and measured again: what remains is the tombstone that
keeps each key taken.

    python bench/bench_storage.py [--emails 200000]
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import statistics
import sys
import threading
import time
from pathlib import Path

import psycopg

from outbox import enqueue
from outbox.config import Settings
from outbox.db.store import data_retention

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script too
from bench.run import database

LOGIN = {"name": "Alice", "code": "123456", "product": "Shop", "minutes": 10}


def fill(url: str, n: int) -> None:
    """``n`` sent emails 40 days old, each with one attempt and three status changes."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO email_outbox (idempotency_key, recipient, template, params,"
            " content_hash, message_id, priority, status, status_reason, attempts,"
            " created_at, queued_at, sent_at, provider_message_id, template_version, sender)"
            " SELECT 'order-' || g || '-confirmation', 'customer' || g || '@example.com',"
            " 'order_confirmation', jsonb_build_object('name', 'Customer ' || g,"
            " 'order_number', g, 'items', jsonb_build_array(jsonb_build_object('name',"
            " 'Blue mug', 'qty', 2, 'price', '12.00')), 'total', '24.00'),"
            " md5(g::text), '<' || md5('m' || g) || '@mail.example.com>', 'bulk', 'sent',"
            " '250 2.0.0 Ok: queued as ' || upper(left(md5('q' || g), 10)), 1,"
            " now() - interval '40 days', now() - interval '40 days',"
            " now() - interval '40 days', upper(left(md5('q' || g), 10)),"
            " md5('template'), 'Shop <orders@shop.example>'"
            " FROM generate_series(1, %s) AS g",
            (n,),
        )
        conn.execute(
            "INSERT INTO email_attempt (outbox_id, attempt, verdict, stage, reply_code,"
            " enhanced_status, reply_text, duration_ms, worker, transport, attempted_at)"
            " SELECT id, 1, 'sent', 'final_reply', 250, '2.0.0', status_reason, 12.5,"
            " 'worker-host:4242:thread-3', 'smtp', sent_at FROM email_outbox"
        )
        conn.execute(
            "INSERT INTO email_event (outbox_id, from_status, to_status, reason, actor, at)"
            " SELECT o.id, s.f, s.t, s.r, 'relay:host:17', o.sent_at FROM email_outbox o,"
            " (VALUES ('pending', 'queued', 'published'), ('queued', 'sending', 'taken'),"
            " ('sending', 'sent', '250 2.0.0 Ok: queued as ABCDEF1234')) AS s(f, t, r)"
        )
        conn.execute("VACUUM ANALYZE")


def measure(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return data_retention.storage_bytes(conn)


class Enqueues(threading.Thread):
    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.longest = 0.0
        self.longest_at = 0.0
        self.count = 0
        self.times: list[float] = []
        self.pid = 0
        self.ready = threading.Event()

    def run(self) -> None:
        settings = Settings(database_url=self.url)
        with psycopg.connect(self.url) as conn:
            self.pid = conn.info.backend_pid
            self.ready.set()
            while not self.stop.is_set():
                started = time.monotonic()
                enqueue(
                    conn,
                    idempotency_key=f"during-{self.count}",
                    to=f"u{self.count}@example.com",
                    template="login_code",
                    params=LOGIN,
                    priority="high",
                    settings=settings,
                )
                conn.commit()
                took = time.monotonic() - started
                self.times.append(took)
                if took > self.longest:
                    self.longest, self.longest_at = took, started
                self.count += 1
                time.sleep(0.005)


class Waits(threading.Thread):
    """What the enqueuing session waits on, sampled every 10 ms (pg_stat_activity).

    A slow enqueue is explained by what it waited for: a lock (the purge would
    be holding one), WAL or data-file I/O (the purge's writes and the
    checkpoints they set off share the disk with the enqueue's commit), or
    nothing (CPU).
    """

    def __init__(self, url: str, pid: int) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.pid = pid
        self.stop = threading.Event()
        self.samples: list[tuple[float, str]] = []

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.wait(0.01):
                row = conn.execute(
                    "SELECT state, coalesce(wait_event_type || ':' || wait_event, 'CPU')"
                    " FROM pg_stat_activity WHERE pid = %s",
                    (self.pid,),
                ).fetchone()
                if row and row[0] == "active":
                    self.samples.append((time.monotonic(), str(row[1])))

    def between(self, start: float, end: float) -> collections.Counter[str]:
        return collections.Counter(w for at, w in self.samples if start <= at <= end)


def checkpoints(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
        ).fetchone()
        return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--emails", type=int, default=200_000)
    args = parser.parse_args()
    n = args.emails
    with database("storage") as url:
        started = time.monotonic()
        fill(url, n)
        print(f"filled {n:,} sent emails with history in {time.monotonic() - started:.1f}s")
        before = measure(url)
        traffic = Enqueues(url)
        traffic.start()
        traffic.ready.wait(10)
        waits = Waits(url, traffic.pid)
        waits.start()
        time.sleep(0.5)
        checkpoints_before = checkpoints(url)
        started = time.monotonic()
        with psycopg.connect(url) as conn:
            purged = data_retention.purge(
                conn, before=dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
            )
        took = time.monotonic() - started
        checkpoints_during = checkpoints(url) - checkpoints_before
        traffic.stop.set()
        traffic.join()
        waits.stop.set()
        waits.join()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM email_outbox WHERE idempotency_key LIKE 'during-%'")
            conn.execute("TRUNCATE email_attempt, email_event")  # only the enqueues' own
            conn.execute("VACUUM FULL")
        after = measure(url)
    total_before = sum(before.values())
    total_after = sum(after.values())
    print(f"\nbytes per table, {n:,} emails: before purge -> after purge and VACUUM FULL")
    for table in sorted(before):
        print(f"  {table:<22} {before[table]:>14,} -> {after.get(table, 0):>14,}")
    print(f"bytes per email kept: {total_before / n:,.0f} before, {total_after / n:,.0f} after")
    print(f"purge: {purged.emails:,} emails in {took:.1f}s ({purged.emails / took:,.0f}/s)")
    times = sorted(traffic.times)
    p99 = times[int(len(times) * 0.99)] if times else 0.0
    print(
        f"enqueues during the purge: {traffic.count:,}, median"
        f" {statistics.median(times) * 1000:.1f} ms, p99 {p99 * 1000:.0f} ms,"
        f" longest {traffic.longest * 1000:.0f} ms; {checkpoints_during} checkpoints"
    )
    slow = waits.between(traffic.longest_at, traffic.longest_at + traffic.longest)
    every = collections.Counter(w for _, w in waits.samples)
    print(f"  the longest enqueue waited on (10 ms samples): {dict(slow.most_common(5))}")
    print(f"  every enqueue together: {dict(every.most_common(6))}")


if __name__ == "__main__":
    main()
