"""What each email costs in CPU, by process and by Postgres statement, beside the raw SMTP limit.

One run prints one table:

1. **The raw limit.** One bare smtplib connection sends pre-rendered newsletter
   messages (built as a worker builds them) to Postfix's smtp-sink, once
   before the drain and once after; the table shows the mean. CPU per message:
   this client's thread, and the sink (psutil).
2. **Outbox end to end.** ``--emails`` newsletter emails (``enqueue_many``,
   not measured) drained by the Procfile's relays (one for high priority, a
   niced one for bulk) and ``--processes`` bulk worker processes x ``--threads``
   (by default one, as the issue's baseline; ``--processes 0``: the pool's default) into the
   same sink, or with ``--reply-ms`` into ``bench/slow_relay.py``, which answers
   each SMTP command that many milliseconds late. Measured from the moment a
   tenth of the emails are sent to the last (start-up left out): emails/s
   (from the rows' ``sent_at``), CPU per email of each process, and per
   Postgres statement (``pg_stat_statements``) its calls, execution time and
   WAL bytes per email, named after the store's named query it is.
3. **Ratios** against the raw limit, each beside its target where one applies.
   With ``--reply-ms``, also what the pool's threads allow: threads divided by
   the time one message's conversation takes (measured: Outbox's own SMTP
   transport, one connection, to the same slow relay).

Postgres is a private, durable cluster started for the run (the machine's has
no ``pg_stat_statements``), so its CPU is the run's alone; the bench's own
connections log in as another role and count in neither its CPU nor its
statements. Statements are tracked at the top level: a trigger's work counts
in the statement that fired it. Redis is the machine's server, counted whole.

    python -m bench.bench_cpu [--emails 20000] [--processes 1] [--threads 8] [--reply-ms 2|20]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import astuple, dataclass
from importlib import resources
from urllib.parse import urlsplit

import psutil
import psycopg

from bench import run
from bench.bench_delivery import (
    CpuMeter,
    Reading,
    postfix_sink,
    slow_relay,
    steady_rate,
    wait_for_results,
)
from bench.bench_scale import statements_postgres
from outbox.cli.worker_pools import pool_processes, usable_cpus
from outbox.db.sql import load_queries
from outbox.testing.pipeline import Pipeline
from outbox.transports.base import OutgoingMessage
from outbox.transports.smtp import SmtpConfig, SmtpTransport

MONITOR = "bench_monitor"  # the role of the bench's own Postgres connections
PG_BACKENDS = "postgres: backends"
PG_OTHER = "postgres: the rest (postmaster, WAL writer, autovacuum...)"
ROLES = {  # Pipeline's process names
    "relay0-high": "relay, high priority",
    "relay0-bulk": "relay, bulk (nice 10)",
    "email_bulk": "bulk worker",
}
STARTED = time.monotonic()
# Statements under both figures, per email, are summed in one row.
SHOWN_US, SHOWN_CALLS = 1.0, 0.01


@dataclass
class Statement:
    query: str
    calls: int
    ms: float  # execution time
    wal: int  # bytes


@dataclass
class Snapshot:
    """What the run had spent when ``sent`` emails were sent."""

    sent: int
    cpu: Reading
    statements: dict[int, Statement]
    wal: int  # the WAL's position, bytes


@dataclass
class Raw:
    rate: float  # messages/s
    client_us: float  # CPU per message
    sink_us: float


# ---------------------------------------------------------------- measuring


def step(what: str) -> None:
    """Progress on stderr, so that a long run shows where it is."""
    print(f"{time.monotonic() - STARTED:6.1f} s  {what}", file=sys.stderr, flush=True)


class ProcessMeter(CpuMeter):
    """CPU seconds of each process of the run, named by what it does."""

    def __init__(
        self,
        pipeline: Pipeline,
        smtp: tuple[str, int],  # what the SMTP server is, its pid
        postmaster: int,
        conn: psycopg.Connection,
    ) -> None:
        super().__init__(pipeline, smtp[1], conn)
        self.smtp_name, self.postmaster = smtp[0], postmaster
        # The machine's Redis server (it shows its address as its name), not others.
        port = f":{urlsplit(run.REDIS_URL).port or 6379}"
        self.redis = [p for p in self.redis if port in " ".join(psutil.Process(p).cmdline())]

    def pids(self) -> Iterator[tuple[str, int]]:
        for name, proc in self.pipeline.procs.items():
            role = ROLES[name]
            children = sorted(
                psutil.Process(proc.pid).children(recursive=True), key=lambda p: p.pid
            )
            if not children:
                yield role, proc.pid
                continue
            yield f"{role}: main process", proc.pid
            for index, child in enumerate(children, 1):
                yield f"{role}: process {index}", child.pid
        yield PG_OTHER, self.postmaster
        for child in psutil.Process(self.postmaster).children():
            with contextlib.suppress(psutil.NoSuchProcess):
                title = " ".join(child.cmdline())
                if f" {MONITOR} " not in title:
                    yield (PG_BACKENDS if "127.0.0.1(" in title else PG_OTHER), child.pid
        yield f"SMTP server: {self.smtp_name}", self.relay_pid
        for pid in self.redis:
            yield "redis (whole server)", pid


def statements(admin: psycopg.Connection, database: str) -> dict[int, Statement]:
    """Each statement's totals so far in ``database``, the bench's own left out."""
    rows = admin.execute(
        "SELECT s.queryid, s.query, s.calls, s.total_exec_time, s.wal_bytes"
        " FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid"
        " JOIN pg_database d ON d.oid = s.dbid"
        " WHERE r.rolname <> current_user AND d.datname = %s",
        (database,),
    )
    return {qid: Statement(q, c, t, int(w)) for qid, q, c, t, w in rows}


def wal_position(admin: psycopg.Connection) -> int:
    row = admin.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0])  # type: ignore[index]


def spent(before: dict[int, Statement], after: dict[int, Statement]) -> list[Statement]:
    """What each statement cost between two snapshots, the costliest first."""
    used = []
    for qid, now in after.items():
        then = before.get(qid, Statement(now.query, 0, 0.0, 0))
        if now.calls > then.calls:
            used.append(
                Statement(now.query, now.calls - then.calls, now.ms - then.ms, now.wal - then.wal)
            )
    return sorted(used, key=lambda s: -s.ms)


def _shape(sql: str) -> str:
    """SQL without comments, constants and parameters, on one line: as
    pg_stat_statements and a ``.sql`` file both write the same query."""
    sql = re.sub(r"--[^\n]*", " ", sql)
    sql = re.sub(r"'(?:[^']|'')*'|%\(\w+\)s|%s|\$\d+|\b\d+\b", "?", sql)
    # NULL, true and false are constants too, but not after IS (a test of its own).
    sql = re.sub(r"(?<!IS )(?<!NOT )\b(?:NULL|true|false)\b", "?", sql, flags=re.IGNORECASE)
    return " ".join(sql.split()).rstrip(";")


def query_names() -> dict[str, str]:
    """The store's named queries (``sending.take_for_sending``) by their shape."""
    names = {}
    for entry in resources.files("outbox.db.store").iterdir():
        if entry.name.endswith(".sql"):
            module = entry.name.removesuffix(".sql")
            queries = load_queries(f"outbox.db.store.{module}")
            names.update({_shape(queries[name]): f"{module}.{name}" for name in queries})
    return names


def statement_label(query: str, names: dict[str, str]) -> str:
    """The named query ``query`` is, else its first characters."""
    shape = _shape(query)
    if shape in names:
        return names[shape]
    # pg_stat_statements takes a few words for constants too (extract's field).
    pattern = re.compile(re.escape(shape).replace(r"\?", r"[^\s(),]+"))
    found = [name for written, name in names.items() if pattern.fullmatch(written)]
    if len(found) == 1:
        return found[0]
    return shape if len(shape) <= 60 else shape[:57] + "..."


def raw_limit(sink_url: str, sink_pid: int, messages: list[OutgoingMessage], n: int) -> Raw:
    sink = psutil.Process(sink_pid)
    before = sum(sink.cpu_times()[:2])
    elapsed, client = run.send_raw(sink_url, messages, n)
    return Raw(n / elapsed, client / n * 1e6, (sum(sink.cpu_times()[:2]) - before) / n * 1e6)


def conversation_seconds(relay_url: str, messages: list[OutgoingMessage], count: int) -> float:
    """How long one message takes on a reused connection, as Outbox's transport speaks."""
    transport = SmtpTransport(SmtpConfig.from_url(relay_url))
    try:
        transport.send(messages[0])  # opens the connection: not counted
        started = time.perf_counter()
        for message in messages[1 : count + 1]:
            reply = transport.send(message)
            if reply.code != 250:
                raise RuntimeError(f"the slow relay refused a message: {reply}")
        return (time.perf_counter() - started) / count
    finally:
        transport.close()


def drain(
    url: str, smtp: tuple[str, str, int], postmaster: int, n: int, bulk: tuple[int, int]
) -> tuple[float, Snapshot, Snapshot]:
    """Emails/s into ``smtp`` (what it is, its url, its pid), and what had been
    spent when a tenth of the emails were sent and when all were."""
    name, smtp_url, smtp_pid = smtp
    settings = run.settings_for(url, smtp_url)
    step(f"enqueueing {n:,} emails")
    run.fill(settings, n)
    monitor = psycopg.conninfo.make_conninfo(url, user=MONITOR)
    admin_url = psycopg.conninfo.make_conninfo(url, user=MONITOR, dbname="postgres")
    with psycopg.connect(monitor, autocommit=True) as conn:
        conn.execute("VACUUM (FREEZE, ANALYZE)")  # the enqueue's clean-up is not the drain's
        env = {**settings.to_env(), "OUTBOX_LOG_LEVEL": "WARNING"}
        pipeline = Pipeline(env, high=(0, 0), bulk=bulk, split_relays=True)
        with psycopg.connect(admin_url, autocommit=True) as admin, pipeline:
            meter = ProcessMeter(pipeline, (name, smtp_pid), postmaster, conn)
            database = conn.info.dbname

            def snapshot(sent: int) -> Snapshot:
                return Snapshot(
                    sent, meter.read(), statements(admin, database), wal_position(admin)
                )

            marks: list[Snapshot] = []
            step(f"draining them into {name}")
            wait_for_results(conn, n, lambda sent: marks.append(snapshot(sent)))
            end = snapshot(n)
            step("drained")
        return steady_rate(conn), marks[0], end


# ---------------------------------------------------------------- the table

Row = tuple[str, str, str, str, str]
HEADER: Row = ("", "per second", "µs per email", "calls per email", "WAL bytes per email")


def row(what: str, rate: str = "", us: str = "", calls: str = "", wal: str = "") -> Row:
    return (what, rate, us, calls, wal)


def table(rows: list[Row]) -> str:
    """Markdown, its columns padded so that it reads as well in a terminal."""
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]

    def line(cells: Row) -> str:
        padded = [cells[0].ljust(widths[0])]
        padded += [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(HEADER), rule, *map(line, rows)])


def process_rows(rate: float, start: Snapshot, end: Snapshot) -> tuple[list[Row], float]:
    """The drain's rate and each process's CPU per email; and their total."""
    counted = end.sent - start.sent
    cpu = {kind: s / counted * 1e6 for kind, s in CpuMeter.used(start.cpu, end.cpu).items()}
    total = sum(cpu.values())
    wal = (end.wal - start.wal) / counted
    rows = [row("**Outbox end to end**: CPU of every process", f"{rate:,.0f}", f"{total:,.0f}",
                wal=f"{wal:,.0f}")]  # fmt: skip
    rows += [row(f"· {kind}", us=f"{us:,.0f}") for kind, us in cpu.items()]
    return rows, total


def statement_rows(start: Snapshot, end: Snapshot) -> list[Row]:
    """Each statement's calls, execution time and WAL per email, the costliest first."""
    counted = end.sent - start.sent
    used = spent(start.statements, end.statements)

    def figures(what: str, group: list[Statement]) -> Row:
        return row(
            what,
            us=f"{sum(s.ms for s in group) * 1e3 / counted:,.1f}",
            calls=f"{sum(s.calls for s in group) / counted:.3f}",
            wal=f"{sum(s.wal for s in group) / counted:,.0f}",
        )

    names = query_names()
    small = [s for s in used if s.ms * 1e3 / counted < SHOWN_US and s.calls / counted < SHOWN_CALLS]
    rows = [figures("**Postgres statements**: execution time", used)]
    rows += [figures(f"· {statement_label(s.query, names)}", [s]) for s in used if s not in small]
    if small:
        rows.append(
            figures(
                f"· {len(small)} more, each under {SHOWN_US:g} µs and {SHOWN_CALLS:g} calls", small
            )
        )
    return rows


def raw_rows(raw: Raw) -> list[Row]:
    return [
        row("**Raw limit**: one smtplib connection, same messages, smtp-sink", f"{raw.rate:,.0f}",
            f"{raw.client_us + raw.sink_us:,.0f}"),
        row("· client", us=f"{raw.client_us:,.0f}"),
        row("· smtp-sink", us=f"{raw.sink_us:,.0f}"),
    ]  # fmt: skip


def against(value: float, shown: str, target: str | None) -> str:
    """``shown``, and whether it meets ``target`` (``">= 0.6"``, ``"<= 900"``) if one applies."""
    if target is None:
        return shown
    sign, bound = target.split()
    met = value >= float(bound) if sign == ">=" else value <= float(bound)
    return f"{shown}, {'met' if met else 'missed'}"


def ratio_rows(
    args: argparse.Namespace, rate: float, total: float, raw: Raw, conversation: float | None
) -> list[Row]:
    """Outbox against the raw limit and, with a slow relay, against what its threads allow.
    The raw limit's targets are set against smtp-sink, the threads' against a 20 ms relay."""
    sink = args.reply_ms is None
    share, cpu_ratio = rate / raw.rate, total / (raw.client_us + raw.sink_us)
    rows = [
        row("**Ratios** (targets against smtp-sink)" if sink else "**Ratios**"),
        row("· Outbox emails/s ÷ raw msg/s (target ≥ 60 %)",
            against(share, f"{share * 100:.0f} %", ">= 0.6" if sink else None)),
        row("· Outbox CPU per email ÷ raw client + sink (target ≤ 3x)",
            us=against(cpu_ratio, f"{cpu_ratio:.1f}x", "<= 3" if sink else None)),
        row("· Outbox CPU per email (target ≤ 900 µs)",
            us=against(total, f"{total:,.0f}", "<= 900" if sink else None)),
    ]  # fmt: skip
    if conversation is not None:
        allowed = args.processes * args.threads / conversation
        share = rate / allowed
        rows += [
            row(f"· what {args.processes} x {args.threads} threads allow:"
                f" {args.processes * args.threads} ÷ {conversation * 1e3:.1f} ms"
                " per message", f"{allowed:,.0f}"),
            row("· Outbox emails/s ÷ what the threads allow (target ≥ 90 % at 20 ms)",
                against(share, f"{share * 100:.0f} %", ">= 0.9" if args.reply_ms == 20 else None)),
        ]  # fmt: skip
    return rows


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--emails", type=int, default=20_000, help="emails drained")
    parser.add_argument("--threads", type=int, default=8, help="threads of the bulk worker")
    parser.add_argument(
        "--processes", type=int, default=1, help="bulk worker processes (0: the pool's default)"
    )
    parser.add_argument(
        "--reply-ms", type=float, help="drain into bench/slow_relay.py answering this late"
    )
    args = parser.parse_args()
    if args.processes == 0:
        args.processes = pool_processes("bulk", os.environ, usable_cpus())
    load = os.getloadavg()[0]
    with statements_postgres() as (server, postmaster, _), postfix_sink() as sink:
        run.ADMIN_URL = server.url
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {MONITOR} LOGIN SUPERUSER")  # type: ignore[arg-type]
        print(f"{run.machine()} (a private cluster for the run)")
        try:
            rows = measure(args, sink, postmaster)
        finally:
            run.forget_namespaces()
    relay = f"a relay answering after {args.reply_ms:g} ms" if args.reply_ms else "smtp-sink"
    print(
        f"{args.emails:,} emails into {relay}; the Procfile's two relays,"
        f" {args.processes} bulk worker process(es) x {args.threads} threads; Redis broker\n"
    )
    print(table(rows))
    print(
        f"\nwall time {time.monotonic() - STARTED:,.0f} s; load average (1 min) {load:.1f} at the"
        f" start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores"
    )
    return 0


def measure(args: argparse.Namespace, sink: tuple[str, int], postmaster: int) -> list[Row]:
    """The raw limit, the drain, the raw limit again: the table's rows."""
    sink_url, sink_pid = sink
    bulk = (args.processes, args.threads)
    step("the raw limit")
    messages = run.prerendered(sink_url, min(args.emails, 2000))
    raws = [raw_limit(sink_url, sink_pid, messages, args.emails)]
    conversation = None
    with run.database("cpu") as url:
        if args.reply_ms is None:
            smtp = ("smtp-sink", sink_url, sink_pid)
            rate, start, end = drain(url, smtp, postmaster, args.emails, bulk)
        else:
            with slow_relay(args.reply_ms) as (relay_url, relay_pid):
                step("one message's conversation with the slow relay")
                conversation = conversation_seconds(relay_url, messages, 50)
                smtp = (f"slow relay, {args.reply_ms:g} ms", relay_url, relay_pid)
                rate, start, end = drain(url, smtp, postmaster, args.emails, bulk)
    step("the raw limit again")
    raws.append(raw_limit(sink_url, sink_pid, messages, args.emails))
    raw = Raw(*(statistics.mean(figures) for figures in zip(*map(astuple, raws), strict=True)))
    processes, total = process_rows(rate, start, end)
    return [
        *processes,
        *statement_rows(start, end),
        *raw_rows(raw),
        *ratio_rows(args, rate, total, raw, conversation),
    ]


if __name__ == "__main__":
    sys.exit(main())
