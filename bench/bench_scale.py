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
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import run  # type: ignore[import-not-found]

from outbox.testing.private_servers import PostgresServer

# What each statement of the send path starts with or contains (queries.sql).
# pg_stat_statements shows constants as $n, so the markers avoid them.
STATEMENTS = {
    "claim": "next_attempt_at <= now()",
    "take": "locked_by = $1, locked_at = now()",
    "record": "INSERT INTO email_attempt",
}


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--emails", type=int, default=10_000)
    parser.add_argument("--brokers", default="redis,rabbitmq")
    parser.add_argument("--processes", default="1,2,4", help="bulk worker processes (8 threads)")
    parser.add_argument("--relays", default="1,2")
    args = parser.parse_args()
    print(run.machine())
    server = PostgresServer(
        "-c shared_preload_libraries=pg_stat_statements -c fsync=on -c full_page_writes=on"
        " -c max_connections=300"
    )
    try:
        server.start()
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            version = admin.execute("SHOW server_version").fetchone()
        pid_file = server.data / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0])
        run.ADMIN_URL = server.url
        with run.smtp_sink() as (smtp_url, kind):
            print(
                f"Postgres {version[0] if version else '?'} (private, fsync on); sink: {kind};"
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
    finally:
        server.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
