"""Scale-out on one Postgres: 1, 2 and 4 bulk worker processes, 1 and 2 relays, per broker.

``python bench/bench_scale.py [--emails N] [--brokers redis,rabbitmq]``

Every configuration drains the same newsletter through the Procfile's processes
(``outbox.testing.pipeline``) into Postfix's smtp-sink (or aiosmtpd) and prints
the first-to-last send rate, the CPU each kind of process spent per email, and
the share of Postgres's statement time that went to the relay's claim, the
workers' take and their result writes. Postgres is a private cluster started
for the run (durable commits, ``pg_stat_statements`` loaded), so its CPU is
this run's alone; on a 2-core machine the worker processes compete with
Postgres for the same cores, so the curve flattens earlier here than it would
with worker hosts of their own.

``python bench/bench_scale.py --costs [--emails N]`` measures instead what one
email costs, enqueue and delivery apart, on one configuration (a relay, two
bulk worker processes of 8 threads, Redis): Postgres backend CPU, Postgres
statement time (``pg_stat_statements``), commits, WAL bytes
(``pg_current_wal_lsn`` before and after), bytes kept in the tables (before
any vacuum) and the workers' and relay's CPU. docs/capacity.md is drawn from
these figures.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import run
from outbox.testing.private_servers import PostgresServer

# What each statement of the send path starts with or contains (queries.sql).
# pg_stat_statements shows constants as $n, so the markers avoid them.
STATEMENTS = {
    "claim": "next_attempt_at <= now()",
    "take": "locked_by = $1, locked_at = now()",
    "record": "INSERT INTO email_attempt",
}


@contextmanager
def statements_postgres() -> Iterator[tuple[PostgresServer, int, str]]:
    """A private, durable cluster with ``pg_stat_statements`` loaded, removed after
    the block: (the server, its postmaster's pid, its version)."""
    server = PostgresServer(
        "-c shared_preload_libraries=pg_stat_statements -c fsync=on -c full_page_writes=on"
        " -c max_connections=300"
    )
    try:
        server.start()
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            version = admin.execute("SHOW server_version").fetchone()
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
        yield server, postmaster, str(version[0]) if version else "?"
    finally:
        server.destroy()


@contextmanager
def statement_shares(admin_url: str, into: dict[str, float]) -> Iterator[None]:
    """Fill ``into`` with each statement's share of all statement time in the block."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("SELECT pg_stat_statements_reset()")
    yield
    with psycopg.connect(admin_url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT query, total_exec_time FROM pg_stat_statements"
            " WHERE query NOT ILIKE '%pg_stat_statements%'"
        ).fetchall()
    total = sum(t for _, t in rows) or 1.0
    for name, marker in STATEMENTS.items():
        into[name] = sum(t for q, t in rows if marker in q) / total * 100


@dataclass
class Costs:
    """What a block of work cost the private Postgres, in totals."""

    cpu_s: float = 0.0  # the cluster's backends and helpers, user + system
    statement_ms: float = 0.0  # pg_stat_statements' execution time
    wal_bytes: int = 0
    commits: int = 0
    table_bytes: int = 0  # tables, indexes and TOAST of the bench database, grown


def cluster_cpu(postmaster: int) -> float:
    """CPU seconds the cluster spent so far: the postmaster, its live backends, and
    (as the postmaster's children's times) every backend that has exited."""
    root = psutil.Process(postmaster)
    times = root.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in root.children():
        with suppress(psutil.NoSuchProcess):
            mine = child.cpu_times()
            total += mine.user + mine.system
    return total


def _snapshot(admin_url: str, postmaster: int) -> tuple[float, float, int, int, int]:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        statement = admin.execute(
            "SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements"
            " WHERE query NOT ILIKE '%pg_stat%' AND query NOT ILIKE '%pg_current_wal%'"
        ).fetchone()
        wal = admin.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        commits = admin.execute(
            "SELECT sum(xact_commit) FROM pg_stat_database WHERE datname LIKE 'outbox_bench_%'"
        ).fetchone()
        bench = admin.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'outbox_bench_%'"
        ).fetchone()
    size = 0
    if bench:
        bench_url = admin_url.rsplit("/", 1)[0] + f"/{bench[0]}"
        with psycopg.connect(bench_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r'"
                " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
                " AND n.nspname NOT LIKE 'pg_toast%'"
            ).fetchone()
            size = int(row[0]) if row else 0
    cpu = cluster_cpu(postmaster)
    return (
        cpu,
        float(statement[0]) if statement else 0.0,
        int(wal[0]) if wal else 0,
        int(commits[0] or 0) if commits else 0,
        size,
    )


@contextmanager
def costs(admin_url: str, postmaster: int, into: Costs) -> Iterator[None]:
    """Fill ``into`` with what the block cost Postgres."""
    before = _snapshot(admin_url, postmaster)
    yield
    after = _snapshot(admin_url, postmaster)
    into.cpu_s, into.statement_ms = after[0] - before[0], after[1] - before[1]
    into.wal_bytes, into.commits = after[2] - before[2], after[3] - before[3]
    into.table_bytes = after[4] - before[4]


def measure_costs(server: PostgresServer, postmaster: int, smtp_url: str, n: int) -> None:
    """Each per-email figure of one drain, enqueue and delivery apart."""
    run.BROKER["url"] = run.BROKERS["redis"]
    enqueue, delivery = Costs(), Costs()
    done = run.drain(
        smtp_url,
        n,
        (2, 8),
        1,
        postmaster=postmaster,
        around=lambda: costs(server.url, postmaster, delivery),
        around_fill=lambda: costs(server.url, postmaster, enqueue),
    )
    print(f"{n:,} emails: enqueue_many in batches of 50,000, then a relay + 2 x 8 worker threads")
    print(f"{'per email':<44} {'enqueue':>10} {'delivery':>10}")
    rows = [
        ("Postgres CPU, backends (µs)", lambda c: c.cpu_s / n * 1e6),
        ("Postgres statement time (µs)", lambda c: c.statement_ms / n * 1e3),
        ("commits", lambda c: c.commits / n),
        ("WAL (bytes)", lambda c: c.wal_bytes / n),
        ("table + index growth, before vacuum (bytes)", lambda c: c.table_bytes / n),
    ]
    for label, figure in rows:
        print(f"{label:<44} {figure(enqueue):>10,.2f} {figure(delivery):>10,.2f}")
    for kind in ("worker", "relay", "redis", "sink"):
        print(f"{kind + ' CPU (µs)':<44} {'':>10} {done.cpu_us.get(kind, 0.0):>10,.0f}")
    print(f"{'first to last send (emails/s)':<44} {'':>10} {done.steady:>10,.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--emails", type=int, default=10_000)
    parser.add_argument("--brokers", default="redis,rabbitmq")
    parser.add_argument("--processes", default="1,2,4", help="bulk worker processes (8 threads)")
    parser.add_argument("--relays", default="1,2")
    parser.add_argument("--costs", action="store_true", help="per-email costs, one configuration")
    args = parser.parse_args()
    print(run.machine())
    with statements_postgres() as (server, postmaster, version):
        run.ADMIN_URL = server.url
        if args.costs:
            with run.smtp_sink() as (smtp_url, kind):
                print(f"Postgres {version} (private); sink: {kind}")
                measure_costs(server, postmaster, smtp_url, args.emails)
            return 0
        with run.smtp_sink() as (smtp_url, kind):
            print(
                f"Postgres {version} (private, fsync on); sink: {kind};"
                f" {args.emails:,} emails per run"
            )
            print(
                f"{'broker':<9} {'relays':>6} {'workers':>7} {'emails/s':>9}  "
                "statement time: claim/take/record  |  CPU µs per email"
            )
            for broker in args.brokers.split(","):
                run.BROKER["url"] = run.BROKERS[broker]
                for relays in (int(r) for r in args.relays.split(",")):
                    for processes in (int(p) for p in args.processes.split(",")):
                        shares: dict[str, float] = {}
                        done = run.drain(
                            smtp_url,
                            args.emails,
                            (processes, 8),
                            relays,
                            postmaster=postmaster,
                            around=lambda shares=shares: statement_shares(server.url, shares),
                        )
                        spent = ", ".join(f"{k} {v:,.0f}" for k, v in done.cpu_us.items() if v)
                        share = "/".join(f"{shares[k]:.0f}%" for k in STATEMENTS)
                        print(
                            f"{broker:<9} {relays:>6} {processes:>7} {done.steady:>9,.0f}  "
                            f"{share:>13}  |  {spent}",
                            flush=True,
                        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
