"""Outbox benchmarks: one command, figures on stdout (and Markdown with --markdown).

Measured in one run, so every figure has its baseline beside it:

* raw SMTP: one bare smtplib client on one reused connection sending the same
  pre-rendered messages to the same sink (the ceiling);
* end to end: enqueue -> relay -> bulk workers -> SMTP accepted -> marked sent;
* login-code latency (commit -> marked sent, an upper bound of commit -> SMTP
  accepted) while a newsletter backlog drains;
* enqueue() and enqueue_many() rates;
* the relay's claim with and without a large history of sent rows;
* worker memory (RSS) while the backlog drains, and CPU per email per process.

The sink is Postfix's smtp-sink when installed (``apt-get install postfix``),
else aiosmtpd (slower: it spends ~0.5 ms of CPU per message).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import os
import platform
import shutil
import smtplib
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg_pool import ConnectionPool

from outbox import enqueue, enqueue_many
from outbox.config import Settings
from outbox.db.store import migration_runner, relaying, sending
from outbox.delivery.deliver import Delivery
from outbox.testing.pipeline import Pipeline
from outbox.testing.redis_keys import drop_namespace
from outbox.testing.sink import SmtpSink
from outbox.transports.base import OutgoingMessage
from outbox.transports.smtp import SmtpConfig, SmtpTransport

ADMIN_URL = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
NEWS = {
    "name": "Reader",
    "title": "What is new this month",
    "intro": "A short introduction paragraph for the newsletter.",
    "url": "https://outbox.example/news/2026-11",
}
LOGIN = {"name": "Alice", "code": "482913", "product": "Outbox", "minutes": 10}
RESULTS: list[tuple[str, str, str]] = []  # (section, figure, value)


def _section(name: str) -> str:
    """A section name with the broker it ran on, when that is not Redis."""
    return f"{name} (rabbitmq)" if BROKER["url"].startswith("amqp") else name


def report(section: str, figure: str, value: str) -> None:
    RESULTS.append((section, figure, value))
    print(f"  {figure:<58} {value}", flush=True)


# ---------------------------------------------------------------- set-up


@contextmanager
def database(tag: str) -> Iterator[str]:
    name = f"outbox_bench_{tag}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        with psycopg.connect(url) as conn:
            migration_runner.migrate(conn)
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def smtp_sink() -> Iterator[tuple[str, str]]:
    """(url, kind) of a fast SMTP sink on loopback."""
    binary = shutil.which("smtp-sink") or (
        "/usr/sbin/smtp-sink" if Path("/usr/sbin/smtp-sink").exists() else None
    )
    if binary is None:
        with SmtpSink() as sink:
            yield sink.url, "aiosmtpd"
        return
    port = SmtpSink().port  # a free port
    command = [binary, f"127.0.0.1:{port}", "1024"]
    if os.geteuid() == 0:
        command[1:1] = ["-u", "nobody"]
    proc = subprocess.Popen(command)
    try:
        for _ in range(50):
            try:
                smtplib.SMTP("127.0.0.1", port, timeout=1).quit()
                break
            except OSError:
                time.sleep(0.1)
        yield f"smtp://127.0.0.1:{port}", "Postfix smtp-sink"
    finally:
        proc.terminate()
        proc.wait()


# The broker of the end-to-end and latency runs (--brokers names them in turn).
BROKERS = {"redis": "", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672/%2F"}
BROKER = {"url": ""}


USED: list[Settings] = []  # each run's own namespace, emptied from Redis at the end


def settings_for(url: str, smtp_url: str, **overrides: Any) -> Settings:
    settings = Settings(
        database_url=url,
        redis_url=REDIS_URL,
        broker_url=BROKER["url"],
        smtp_url=smtp_url,
        namespace=f"bench-{uuid.uuid4().hex[:8]}",
        **overrides,
    )
    USED.append(settings)
    return settings


def forget_namespaces() -> None:
    """Delete the Redis keys of every namespace this run used (heartbeats,
    queues, the relay's epoch), as each database is dropped."""
    while USED:
        settings = USED.pop()
        for pattern in drop_namespace(settings, settings.namespace):
            print(f"keys left in Redis: {pattern}", file=sys.stderr)


def newsletter(n: int, prefix: str = "nl") -> Iterator[dict[str, Any]]:
    for i in range(n):
        yield {
            "idempotency_key": f"{prefix}-{i}",
            "to": f"reader{i}@example.com",
            "template": "newsletter",
            "params": {**NEWS, "name": f"Reader {i}"},
        }


def fill(settings: Settings, n: int, prefix: str = "nl") -> None:
    with psycopg.connect(settings.database_url) as conn:
        for start in range(0, n, 50_000):
            batch = newsletter(min(50_000, n - start), prefix=f"{prefix}{start}")
            enqueue_many(conn, batch, settings=settings)
            conn.commit()


def count_status(settings: Settings, status: str) -> int:
    with psycopg.connect(settings.database_url) as conn:
        row = conn.execute("SELECT count(*) FROM email_outbox WHERE status = %s", (status,))
        return int(row.fetchone()[0])  # type: ignore[index]


class CpuMeter:
    """CPU seconds per kind of process, from psutil, between start() and stop()."""

    KINDS = ("worker", "relay", "postgres", "redis", "rabbitmq", "sink")

    def __init__(self, *, postmaster: int | None = None) -> None:
        # With a private Postgres (its postmaster's pid), only this run's processes
        # count: this process's children and that cluster's backends, not the
        # machine's other work. Redis, RabbitMQ and the sink are counted whole.
        self.postmaster = postmaster
        self.before: dict[str, float] = {}
        self.after: dict[str, float] = {}
        self.peak_rss: dict[int, int] = {}

    def sample(self) -> dict[str, float]:
        totals: dict[str, float] = collections.Counter()
        for proc in psutil.process_iter(["name", "cmdline"]):
            try:
                kind = self.kind(proc)
                if kind and self.postmaster and not self.ours(proc, kind):
                    continue
                if kind:
                    times = proc.cpu_times()
                    totals[kind] += times.user + times.system
                    if kind == "worker":
                        rss = proc.memory_info().rss
                        self.peak_rss[proc.pid] = max(self.peak_rss.get(proc.pid, 0), rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return totals

    def ours(self, proc: psutil.Process, kind: str) -> bool:
        if kind in ("redis", "rabbitmq", "sink"):
            return True
        root = self.postmaster if kind == "postgres" else os.getpid()
        return proc.pid == root or any(p.pid == root for p in proc.parents())

    @staticmethod
    def kind(proc: psutil.Process) -> str | None:
        name = proc.info["name"] or ""
        command = " ".join(proc.info["cmdline"] or [])
        if "postgres" in name:
            return "postgres"
        if "redis-server" in name:
            return "redis"
        if "beam.smp" in name and "rabbit" in command:
            return "rabbitmq"
        if "smtp-sink" in command:
            return "sink"
        if "dramatiq" in command and "outbox.worker" in command:
            return "worker"
        if "outbox.cli relay" in command:
            return "relay"
        return None

    def worker_rss_mb(self) -> list[float]:
        return [rss / 2**20 for rss in self.peak_rss.values()]


def watch_rss(meter: CpuMeter, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        meter.sample()


# ---------------------------------------------------------------- benchmarks


def prerendered(smtp_url: str, count: int) -> list[OutgoingMessage]:
    """``count`` newsletter emails as a worker builds them, ready to send."""
    with database("raw") as url:
        settings = settings_for(url, smtp_url)
        fill(settings, count)
        with ConnectionPool(url, min_size=1, max_size=1) as pool:
            delivery = Delivery(settings, pool, SmtpTransport(SmtpConfig.from_url(smtp_url)))
            with pool.connection() as conn:
                conn.execute("UPDATE email_outbox SET status = 'queued'")
                ids = [r[0] for r in conn.execute("SELECT id FROM email_outbox ORDER BY id")]
            with pool.connection() as conn:
                rows = sending.take_for_sending(conn, ids, "bench")
            return [delivery.build(row) for row in rows]


def send_raw(smtp_url: str, messages: list[OutgoingMessage], n: int) -> tuple[float, float]:
    """``n`` of ``messages`` (in turn) sent by bare smtplib over one connection:
    the wall seconds and this thread's CPU seconds that took."""
    host, port = smtp_url.removeprefix("smtp://").split(":")
    client = smtplib.SMTP(host, int(port))
    client.ehlo()
    started, cpu = time.perf_counter(), time.thread_time()
    for i in range(n):
        message = messages[i % len(messages)]
        client.sendmail(message.envelope_from, [message.recipient], message.data)
    elapsed, cpu = time.perf_counter() - started, time.thread_time() - cpu
    client.quit()
    return elapsed, cpu


def bench_raw_smtp(smtp_url: str, n: int) -> float:
    """The ceiling: pre-rendered messages over one reused connection."""
    elapsed, _ = send_raw(smtp_url, prerendered(smtp_url, min(n, 2000)), n)
    rate = n / elapsed
    report("raw SMTP", f"smtplib, 1 connection, {n:,} pre-rendered messages", f"{rate:,.0f} msg/s")
    return rate


@dataclass
class Drained:
    """One newsletter drained through the Procfile's processes."""

    elapsed: float  # wall seconds, worker start-up included
    steady: float  # emails/s from the first send to the last
    cpu_us: dict[str, float]  # CPU per email by kind of process
    meter: CpuMeter


def drain(
    smtp_url: str,
    n: int,
    bulk: tuple[int, int],
    relays: int = 1,
    *,
    postmaster: int | None = None,
    around: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
    around_fill: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> Drained:
    """Drain ``n`` emails; ``around`` wraps the drain alone, ``around_fill`` the enqueue."""
    with database("e2e") as url:
        settings = settings_for(url, smtp_url)
        with around_fill():
            fill(settings, n)
        meter = CpuMeter(postmaster=postmaster)
        env = {**settings.to_env(), "OUTBOX_LOG_LEVEL": "WARNING"}
        stop = threading.Event()
        with around(), Pipeline(env, relays=relays, high=(0, 0), bulk=bulk):
            before = meter.sample()
            watcher = threading.Thread(target=watch_rss, args=(meter, stop))
            watcher.start()
            started = time.perf_counter()
            while count_status(settings, "sent") < n:
                time.sleep(0.1)
            elapsed = time.perf_counter() - started
            after = meter.sample()
            stop.set()
            watcher.join()
        with psycopg.connect(url) as conn:
            first, last = conn.execute(
                "SELECT min(sent_at), max(sent_at) FROM email_outbox"
            ).fetchone()  # type: ignore[misc]
    cpu = {k: (after.get(k, 0.0) - before.get(k, 0.0)) / n * 1e6 for k in CpuMeter.KINDS}
    return Drained(elapsed, n / max((last - first).total_seconds(), 1e-9), cpu, meter)


def bench_end_to_end(smtp_url: str, n: int, bulk: tuple[int, int]) -> tuple[float, CpuMeter]:
    drained = drain(smtp_url, n, bulk)
    steady, rate, meter = drained.steady, n / drained.elapsed, drained.meter
    processes, threads = bulk
    label = f"{n:,} emails, relay + {processes} bulk worker processes x {threads} threads"
    report(_section("end to end"), label, f"{rate:,.0f} emails/s (wall, incl. worker start-up)")
    report(_section("end to end"), "first to last send", f"{steady:,.0f} emails/s")
    for kind, used in drained.cpu_us.items():
        report(_section("end to end"), f"CPU per email: {kind}", f"{used:,.0f} µs")
    rss = meter.worker_rss_mb()
    if rss:
        report(_section("end to end"), "worker RSS, peak per process", f"{max(rss):,.0f} MB")
    return steady, meter


def bench_login_latency(smtp_url: str, backlog: int, samples: int) -> None:
    with database("latency") as url:
        settings = settings_for(url, smtp_url)
        fill(settings, backlog)
        env = {**settings.to_env(), "OUTBOX_LOG_LEVEL": "WARNING"}
        meter = CpuMeter()
        stop = threading.Event()
        watcher = threading.Thread(target=watch_rss, args=(meter, stop))
        with Pipeline(env, high=(1, 4), bulk=(2, 8), split_relays=True):
            watcher.start()
            while count_status(settings, "sent") < min(2000, backlog // 10):
                time.sleep(0.1)  # the backlog is draining now
            with psycopg.connect(url) as conn:
                for i in range(samples):
                    enqueue(
                        conn,
                        idempotency_key=f"login-{i}",
                        to=f"user{i}@example.com",
                        template="login_code",
                        params=LOGIN,
                        priority="high",
                        settings=settings,
                    )
                    conn.commit()
                    time.sleep(0.05)
            deadline = time.monotonic() + 60
            while _login_sent(url) < samples and time.monotonic() < deadline:
                time.sleep(0.05)
            bulk_left = backlog + samples - count_status(settings, "sent")
            stop.set()
            watcher.join()
        with psycopg.connect(url) as conn:
            latencies = [
                float(r[0])
                for r in conn.execute(
                    "SELECT extract(epoch FROM sent_at - created_at) FROM email_outbox"
                    " WHERE priority = 'high' AND status = 'sent'"
                )
            ]
            # Where the time goes, from the rows' own timestamps.
            stages = conn.execute(
                "SELECT extract(epoch FROM queued_at - created_at),"
                " extract(epoch FROM e.at - queued_at), extract(epoch FROM sent_at - e.at)"
                " FROM email_outbox o JOIN email_event e ON e.outbox_id = o.id"
                " AND e.to_status = 'sending'"
                " WHERE priority = 'high' AND status = 'sent'"
            ).fetchall()
    latencies.sort()
    report(
        _section("login latency"),
        f"login codes sent while {backlog:,} bulk rows drain",
        str(len(latencies)),
    )
    report(
        _section("login latency"),
        "bulk rows still unsent when the last code went",
        f"{bulk_left:,}",
    )
    for q in (50, 90, 99):
        report(
            _section("login latency"),
            f"commit -> sent p{q}",
            f"{_percentile(latencies, q) * 1000:.1f} ms",
        )
    report(_section("login latency"), "max", f"{latencies[-1] * 1000:.1f} ms")
    for index, stage in enumerate(("commit -> published", "published -> taken", "taken -> sent")):
        values = sorted(float(row[index]) for row in stages)
        figures = " / ".join(f"{_percentile(values, q) * 1000:.0f}" for q in (50, 90, 99))
        report(_section("login latency"), f"{stage} p50 / p90 / p99", f"{figures} ms")
    rss = meter.worker_rss_mb()
    report(_section("login latency"), "worker RSS, peak per process", f"{max(rss):,.0f} MB")


def _login_sent(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM email_outbox WHERE priority = 'high' AND status = 'sent'"
        ).fetchone()
        return int(row[0])  # type: ignore[index]


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def bench_enqueue(n_single: int, n_many: int) -> None:
    with database("enqueue") as url:
        settings = settings_for(url, "smtp://127.0.0.1:1")
        with psycopg.connect(url) as conn:
            started = time.perf_counter()
            for i in range(n_single):
                enqueue(
                    conn,
                    idempotency_key=f"single-{i}",
                    to=f"user{i}@example.com",
                    template="login_code",
                    params=LOGIN,
                    priority="high",
                    settings=settings,
                )
                conn.commit()
            single = n_single / (time.perf_counter() - started)
            rows = list(newsletter(n_many, prefix="many"))
            started = time.perf_counter()
            enqueue_many(conn, rows, settings=settings)
            conn.commit()
            many = n_many / (time.perf_counter() - started)
    report("enqueue", "enqueue(), one transaction each, 1 connection", f"{single:,.0f} /s")
    report("enqueue", f"enqueue_many(), {n_many:,} validated rows", f"{many:,.0f} rows/s")


def bench_claim(history: int, rows: int, scheduled: int = 0) -> None:
    """The relay's claim (select due rows, mark them queued, commit): on an empty
    table, with ``history`` sent rows, and with ``scheduled`` rows due tomorrow."""
    results = {}
    cases = [("empty table", 0, "sent"), (f"{history:,} sent rows", history, "sent")]
    if scheduled:
        cases.append((f"{scheduled:,} rows scheduled for tomorrow", scheduled, "scheduled"))
    for label, size, kind in cases:
        with database("claim") as url:
            settings = settings_for(url, "smtp://127.0.0.1:1")
            if size:
                _add_history(url, size, scheduled=kind == "scheduled")
            fill(settings, rows, prefix="due")
            with psycopg.connect(url) as conn:
                started = time.perf_counter()
                claimed = 0
                while claimed < rows:
                    claimed += len(relaying.claim_due(conn, priority="bulk", limit=500, relay="b"))
                    conn.commit()
                elapsed = time.perf_counter() - started
            results[label] = rows / elapsed
            report("relay claim", f"claim + mark queued, {label}", f"{results[label]:,.0f} rows/s")
    empty = next(iter(results.values()))
    for label, rate in list(results.items())[1:]:
        report("relay claim", f"{label} vs empty", f"{(rate / empty - 1) * 100:+.1f} %")


def _add_history(url: str, size: int, *, scheduled: bool = False) -> None:
    """``size`` sent rows, or (``scheduled``) pending bulk rows with send_at tomorrow."""
    with psycopg.connect(url, autocommit=True) as conn:
        if scheduled:
            conn.execute(
                """
                INSERT INTO email_outbox (idempotency_key, recipient, template, params,
                    content_hash, message_id, priority, status, send_at, next_attempt_at)
                SELECT 'later-' || g, 'r' || g || '@example.com', 'newsletter', '{}', 'x',
                       '<later-' || g || '@outbox.localhost>', 'bulk', 'pending',
                       now() + interval '1 day', now() + interval '1 day'
                FROM generate_series(1, %s) AS g
                """,
                (size,),
            )
        else:
            conn.execute(
                """
                INSERT INTO email_outbox (idempotency_key, recipient, template, params,
                    content_hash, message_id, priority, status, attempts, sent_at, created_at)
                SELECT 'old-' || g, 'r' || g || '@example.com', 'newsletter', '{}', 'x',
                       '<old-' || g || '@outbox.localhost>', 'bulk', 'sent', 1, now(), now()
                FROM generate_series(1, %s) AS g
                """,
                (size,),
            )
        conn.execute("VACUUM ANALYZE email_outbox")


def machine() -> str:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = psutil.virtual_memory().total / 2**30
    with psycopg.connect(ADMIN_URL) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    return (
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores ({cpu}), "
        f"{memory:.0f} GiB; Python {platform.python_version()}; PostgreSQL {pg}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--emails", type=int, default=30_000, help="end-to-end emails")
    parser.add_argument("--backlog", type=int, default=100_000, help="bulk rows behind login codes")
    parser.add_argument("--logins", type=int, default=200, help="login codes sampled")
    parser.add_argument(
        "--history", type=int, default=1_000_000, help="sent rows for the claim test"
    )
    parser.add_argument(
        "--scheduled", type=int, default=1_000_000, help="rows due tomorrow for the claim test"
    )
    parser.add_argument("--workers", default="2x8", help="bulk pool: processes x threads")
    parser.add_argument("--only", nargs="*", default=None,
                        choices=["raw", "e2e", "latency", "enqueue", "claim"])  # fmt: skip
    parser.add_argument("--markdown", type=Path, help="also write the figures as a Markdown table")
    parser.add_argument(
        "--brokers", default="redis", help="end to end and latency on each: redis,rabbitmq"
    )
    args = parser.parse_args()
    bulk = tuple(int(x) for x in args.workers.split("x"))
    wanted = set(args.only or ["raw", "e2e", "latency", "enqueue", "claim"])
    about = machine()
    print(about)
    try:
        return _run(args, wanted, bulk, about)
    finally:
        forget_namespaces()


def _run(args: argparse.Namespace, wanted: set[str], bulk: tuple[int, ...], about: str) -> int:
    with smtp_sink() as (smtp_url, sink_kind):
        print(f"sink: {sink_kind}")
        raw = bench_raw_smtp(smtp_url, 20_000) if "raw" in wanted or "e2e" in wanted else None
        for broker in args.brokers.split(","):
            BROKER["url"] = BROKERS[broker]
            print(f"broker: {broker}")
            if "e2e" in wanted:
                steady, _ = bench_end_to_end(smtp_url, args.emails, (bulk[0], bulk[1]))
                if raw:
                    share = f"{steady / raw * 100:.0f} %"
                    report(f"end to end ({broker})", "share of the raw SMTP limit", share)
            if "latency" in wanted:
                bench_login_latency(smtp_url, args.backlog, args.logins)
        BROKER["url"] = ""
    if "enqueue" in wanted:
        bench_enqueue(2000, 100_000)
    if "claim" in wanted:
        bench_claim(args.history, 20_000, args.scheduled)
    if args.markdown:
        lines = [f"Measured {about}; sink: {sink_kind}.", "", "| section | figure | value |",
                 "|---|---|---|", *(f"| {s} | {f} | {v} |" for s, f, v in RESULTS)]  # fmt: skip
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
