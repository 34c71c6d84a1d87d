"""What the index on provider_message_id costs the worker's write of results.

Webhooks find their row by the provider's id (migration 0010), and SMTP rows
carry one too (the relay's "queued as" id), so the index takes an entry for
nearly every sent row. This measures `record_results`, the statement a bulk
worker runs per batch of 25, with and without that index, alternating rounds
on fresh rows in a scratch database:

    python bench/bench_provider_index.py [--rows 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from pathlib import Path

import psycopg

from outbox import enqueue_many
from outbox.db.store import results

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script too
from bench.run import database

INDEX = "email_outbox_provider_message_id"
CREATE_INDEX = (
    f"CREATE INDEX {INDEX} ON email_outbox (provider_message_id) "
    "WHERE provider_message_id IS NOT NULL"
)
NEWS = {"name": "R", "title": "News", "intro": "Hi", "url": "https://x.example"}
WORKER = "bench-worker"
BATCH = 25


def fresh_rows(conn: psycopg.Connection[tuple[object, ...]], n: int) -> list[int]:
    """``n`` rows in `sending`, held by the bench worker, as a worker finds them."""
    conn.execute("TRUNCATE email_outbox, email_attempt, email_event")
    emails = (
        {"idempotency_key": f"k-{i}", "to": f"r{i}@example.org", "template": "newsletter"}
        for i in range(n)
    )
    enqueue_many(conn, ({**e, "params": NEWS} for e in emails))
    conn.execute(
        "UPDATE email_outbox SET status = 'sending', attempts = 1, locked_by = %s, "
        "locked_at = now()",
        (WORKER,),
    )
    conn.commit()
    conn.autocommit = True
    conn.execute("VACUUM ANALYZE email_outbox")
    conn.autocommit = False
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM email_outbox ORDER BY id")]  # type: ignore[call-overload]
    conn.commit()
    return ids


def attempt_records(ids: list[int]) -> list[results.AttemptRecord]:
    return [
        results.AttemptRecord(
            id=i,
            attempt=1,
            status="sent",
            reason="250 2.0.0 Ok: queued",
            delay_seconds=0.0,
            provider_message_id=secrets.token_hex(5).upper(),  # a Postfix queue id's shape
            verdict="sent",
            stage="data",
            reply_code=250,
            enhanced_status="2.0.0",
            reply_text="Ok: queued",
            duration_ms=1.0,
            transport="smtp",
        )
        for i in ids
    ]


def one_round(url: str, n: int, indexed: bool) -> tuple[float, list[float]]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX IF EXISTS {INDEX}")
        if indexed:
            conn.execute(CREATE_INDEX)
        conn.autocommit = False
        ids = fresh_rows(conn, n)
        batches = [ids[i : i + BATCH] for i in range(0, len(ids), BATCH)]
        latencies: list[float] = []
        started = time.perf_counter()
        for batch in batches:
            t0 = time.perf_counter()
            results.record_results(conn, [(WORKER, r) for r in attempt_records(batch)])
            conn.commit()
            latencies.append((time.perf_counter() - t0) * 1000)
        return n / (time.perf_counter() - started), latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    figures: dict[bool, list[tuple[float, list[float]]]] = {True: [], False: []}
    with database("index") as url:
        for _ in range(args.rounds):
            for indexed in (False, True):
                figures[indexed].append(one_round(url, args.rows, indexed))
    print(f"record_results, batches of {BATCH}, {args.rows:,} rows per round, {args.rounds} rounds")
    for indexed in (False, True):
        rates = [rate for rate, _ in figures[indexed]]
        latencies = sorted(ms for _, batch in figures[indexed] for ms in batch)
        p50 = statistics.median(latencies)
        p99 = latencies[int(len(latencies) * 0.99)]
        label = "with index   " if indexed else "without index"
        print(
            f"{label}: {statistics.median(rates):,.0f} rows/s (rounds: "
            f"{', '.join(f'{r:,.0f}' for r in rates)}); "
            f"per batch p50 {p50:.2f} ms, p99 {p99:.2f} ms"
        )
    without = statistics.median(rate for rate, _ in figures[False])
    with_index = statistics.median(rate for rate, _ in figures[True])
    print(f"cost of the index: {(without - with_index) / without:+.1%} of the rate")


if __name__ == "__main__":
    main()
