"""What events cost: recording them per email, and delivering them as webhooks.

1. Recording. The pipeline of ``bench/bench_delivery.py`` (a relay per
   priority, one bulk worker process x 8 threads) drains a newsletter of N
   emails into an SMTP relay, in rounds alternating between two databases of
   this same checkout: one as migrated (each email's outcome recorded as an
   event by the status trigger) and one writing the status history alone. The
   figure is the CPU per email of the whole pipeline (workers, relays, the
   round's Postgres backends, the SMTP relay, Redis) with events over without,
   pair by pair.

2. The statement. Postgres's CPU for recording workers' results
   (``record_results``, 25 a statement, each committed) with events and
   without (the status trigger writing the history alone), alternating in one
   database: the events' own cost per email, which the pipeline's noise can hide.

3. Delivery. ``outbox webhooks deliver`` (a process of its own) posts E
   events (two per email: sent, then bounced) to one endpoint, a receiver
   answering every request after 20 ms (bench/webhook_sink.py, uvicorn), with
   OUTBOX_WEBHOOK_CONCURRENCY requests at once. The figures: events delivered
   per second from the first delivery to the last, and the deliverer's and
   its Postgres backend's CPU per event. (Order per email under concurrency
   is tested in tests/integration/test_event_webhooks.py.)

    python -m bench.bench_events [--emails 3000] [--pairs 4] [--smtp-sink | --reply-ms 2]
        [--events 20000] [--concurrency 32] [--only recording|delivery]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import psutil
import psycopg

from bench.bench_delivery import (
    CHECKOUT,
    REDIS_URL,
    Round,
    Tree,
    checkout_tree,
    database,
    one_round,
    postfix_sink,
    prepared,
    show,
    slow_relay,
    url_of,
)
from bench.run import machine
from outbox.db.store import results

# The status history's trigger function without the events it also writes
# (migration 0031): the status history alone, as migration 0001 wrote it.
HISTORY_ONLY = """
CREATE OR REPLACE FUNCTION email_outbox_record_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_event (outbox_id, from_status, to_status, reason, actor)
    SELECT n.id, o.status, n.status, n.status_reason, n.locked_by
    FROM new_rows n JOIN old_rows o USING (id)
    WHERE n.status IS DISTINCT FROM o.status;
    RETURN NULL;
END $$"""
AS_MIGRATED = "SELECT pg_get_functiondef('email_outbox_record_update'::regproc)"


def without_events(tree: Tree) -> None:
    """The tree's template database writing no events: the status history alone
    on update, and the insert trigger off."""
    with psycopg.connect(url_of(tree.template), autocommit=True) as conn:
        conn.execute(HISTORY_ONLY)
        conn.execute("ALTER TABLE email_outbox DISABLE TRIGGER outbox_event_on_insert")


def events_of(name: str) -> int:
    with psycopg.connect(url_of(name)) as conn:
        return int(conn.execute("SELECT count(*) FROM outbox_event").fetchone()[0])  # type: ignore[index]


def recording(args: argparse.Namespace) -> None:
    tag = uuid.uuid4().hex[:6]
    relay_cm = postfix_sink() if args.smtp_sink else slow_relay(args.reply_ms)
    with_events = checkout_tree()
    plain = Tree("baseline", CHECKOUT, with_events.commit)
    with (
        relay_cm as (smtp_url, relay_pid),
        prepared(with_events, args.emails, tag) as tree_a,
        prepared(plain, args.emails, tag) as tree_b,
    ):
        without_events(tree_b)
        order = [tree_b, tree_a]
        for _ in range(args.warmup):
            for tree in order:
                show("warm-up", one_round(tree, smtp_url, relay_pid, args.emails, 8))
        pairs: list[tuple[Round, Round]] = []
        for index in range(args.pairs):
            done = tuple(
                one_round(tree, smtp_url, relay_pid, args.emails, 8)
                for tree in (order if index % 2 == 0 else order[::-1])
            )
            for result in done:
                show(f"pair {index + 1}", result)
            pairs.append(done)  # type: ignore[arg-type]
    ratios = []
    for pair in pairs:
        by = {r.tree: sum(r.cpu_us.values()) for r in pair}
        ratios.append(by["checkout"] / by["baseline"])
    ratios.sort()
    with_cpu = sorted(sum(r.cpu_us.values()) for p in pairs for r in p if r.tree == "checkout")
    without_cpu = sorted(sum(r.cpu_us.values()) for p in pairs for r in p if r.tree == "baseline")
    median = _median(ratios)
    print(
        f"recording: CPU per email with events {_median(with_cpu):,.0f} µs,"
        f" without {_median(without_cpu):,.0f} µs; per pair with/without:"
        f" median {median:.3f} (min {ratios[0]:.3f}, max {ratios[-1]:.3f}), {len(pairs)} pairs",
        flush=True,
    )


def _median(values: list[float]) -> float:
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def statement(args: argparse.Namespace) -> None:
    """Postgres CPU of recording results (record_results, 25 a statement, each
    its own commit as a worker's writer commits them) with events and without,
    alternating, in one database: what writing the events adds per email."""
    per_round = 2000
    rounds = 2 * args.pairs
    with database(f"outbox_bench_events_{uuid.uuid4().hex[:6]}") as name:
        env = {**os.environ, **checkout_tree().env(), "DATABASE_URL": url_of(name)}
        subprocess.run(
            [sys.executable, "-m", "outbox.cli", "migrate"],
            env=env,
            check=True,
            capture_output=True,
        )
        with psycopg.connect(url_of(name), autocommit=True) as conn:
            conn.execute(FILL, {"emails": per_round * rounds})  # type: ignore[arg-type]
            conn.execute("UPDATE email_outbox SET status = 'sending', locked_by = 'w'")
            conn.execute("VACUUM (FREEZE, ANALYZE)")
            backend = psutil.Process(int(conn.execute("SELECT pg_backend_pid()").fetchone()[0]))  # type: ignore[index]
            with_events = str(conn.execute(AS_MIGRATED).fetchone()[0])  # type: ignore[index]
            used: dict[bool, list[float]] = {True: [], False: []}
            for index in range(rounds):
                on = index % 4 in (0, 3)  # on, off, off, on, ...: drift weighs on both
                conn.execute(with_events if on else HISTORY_ONLY)  # type: ignore[arg-type]
                ids = range(index * per_round + 1, (index + 1) * per_round + 1)
                before = backend.cpu_times()
                for start in range(0, per_round, 25):
                    results.record_results(conn, [("w", _sent(i)) for i in ids[start : start + 25]])
                after = backend.cpu_times()
                cpu = (after.user + after.system) - (before.user + before.system)
                used[on].append(cpu / per_round * 1e6)
            events = conn.execute("SELECT count(*) FROM outbox_event").fetchone()[0]  # type: ignore[index]
    on, off = _median(used[True]), _median(used[False])
    print(
        f"statement: Postgres CPU per email recording results, 25 a statement: with"
        f" events {on:,.1f} µs, without {off:,.1f} µs: {on - off:+,.1f} µs per email"
        f" ({rounds // 2} rounds of {per_round} each; {events:,} events written)",
        flush=True,
    )


def _sent(outbox_id: int) -> results.AttemptRecord:
    return results.AttemptRecord(
        id=outbox_id, attempt=1, status="sent", reason="250 2.0.0 ok", delay_seconds=0.0,
        provider_message_id=f"Q{outbox_id}", verdict="sent", stage="final_reply",
        reply_code=250, enhanced_status="2.0.0", reply_text="2.0.0 Ok: queued", duration_ms=3.0,
    )  # fmt: skip


@contextlib.contextmanager
def receiver(reply_ms: float) -> Iterator[tuple[str, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.webhook_sink", "--reply-ms", str(reply_ms)],
        cwd=CHECKOUT,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}/hooks", proc.pid
    finally:
        proc.terminate()
        proc.wait()


FILL = """
INSERT INTO email_outbox
    (idempotency_key, recipient, template, content_hash, message_id, priority)
SELECT 'wh-' || i, 'reader' || i || '@example.com', 'newsletter', 'x',
       '<wh-' || i || '@bench>', 'bulk'
FROM generate_series(1, %(emails)s) AS i
"""


def delivery(args: argparse.Namespace) -> None:
    tree = checkout_tree()
    secret = "bench-" + uuid.uuid4().hex + uuid.uuid4().hex
    emails = args.events // 2
    with (
        database(f"outbox_bench_events_{uuid.uuid4().hex[:6]}") as name,
        receiver(20.0) as (url, _),
    ):
        env = {
            **os.environ,
            **tree.env(),
            "DATABASE_URL": url_of(name),
            "REDIS_URL": REDIS_URL,
            "OUTBOX_SECRET": secret,
            "OUTBOX_WEBHOOK_ALLOW_PRIVATE": "1",
            "OUTBOX_WEBHOOK_CONCURRENCY": str(args.concurrency),
        }
        outbox = [sys.executable, "-m", "outbox.cli"]
        subprocess.run([*outbox, "migrate"], env=env, check=True, capture_output=True)
        created = subprocess.run(
            [*outbox, "webhooks", "create", url],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        endpoint = int(created.stdout.split()[0])
        with psycopg.connect(url_of(name), autocommit=True) as conn:
            conn.execute(FILL, {"emails": emails})  # type: ignore[arg-type]
            conn.execute("UPDATE email_outbox SET status = 'sent', provider_message_id = 'Q1'")
            conn.execute(
                "INSERT INTO outbox_event (outbox_id, type, status, reason, detail)"
                " SELECT id, 'email.bounced', 'sent', 'hard bounce 5.1.1', 'hard' FROM email_outbox"
            )
            total = events_of(name)
            deliverer = subprocess.Popen([*outbox, "webhooks", "deliver"], env=env)
            try:
                started, cpu_before = _wait_first(conn), _cpu(deliverer.pid, conn)
                while _delivered(conn, endpoint) < total:
                    time.sleep(0.05)
                    if deliverer.poll() is not None:
                        raise RuntimeError("outbox webhooks deliver stopped")
                elapsed = time.monotonic() - started
                used = {k: v - cpu_before.get(k, 0.0) for k, v in _cpu(deliverer.pid, conn).items()}
                left = conn.execute("SELECT count(*) FROM webhook_delivery").fetchone()[0]  # type: ignore[index]
            finally:
                deliverer.terminate()
                deliverer.wait(30)
    print(
        f"delivery: {total:,} events to one endpoint answering after 20 ms,"
        f" {args.concurrency} at once: {total / elapsed:,.0f} events/s;"
        f" CPU per event: deliverer {used['deliverer'] / total * 1e6:,.0f} µs,"
        f" its Postgres backend {used['postgres'] / total * 1e6:,.0f} µs; deliveries left {left}",
        flush=True,
    )


def _delivered(conn: psycopg.Connection, endpoint: int) -> int:
    row = conn.execute("SELECT delivered FROM webhook_endpoint WHERE id = %s", (endpoint,))
    return int(row.fetchone()[0])  # type: ignore[index]


def _wait_first(conn: psycopg.Connection) -> float:
    while not conn.execute("SELECT delivered > 0 FROM webhook_endpoint").fetchone()[0]:  # type: ignore[index]
        time.sleep(0.005)
    return time.monotonic()


def _cpu(pid: int, conn: psycopg.Connection) -> dict[str, float]:
    found = {"deliverer": 0.0, "postgres": 0.0}
    with contextlib.suppress(psutil.NoSuchProcess):
        times = psutil.Process(pid).cpu_times()
        found["deliverer"] = times.user + times.system
    backends = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid()"
    ).fetchall()
    for (backend,) in backends:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            times = psutil.Process(backend).cpu_times()
            found["postgres"] += times.user + times.system
    return found


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--emails", type=int, default=3000, help="emails per recording round")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1)
    relay = parser.add_mutually_exclusive_group()
    relay.add_argument("--reply-ms", type=float, default=2.0, help="the slow relay's delay")
    relay.add_argument("--smtp-sink", action="store_true", help="Postfix's smtp-sink instead")
    parser.add_argument("--events", type=int, default=20000, help="events delivered")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--only", choices=["recording", "statement", "delivery"])
    args = parser.parse_args()
    print(machine(), f"load average {os.getloadavg()[0]:.1f}", flush=True)
    if args.only in (None, "recording"):
        recording(args)
    if args.only in (None, "statement"):
        statement(args)
    if args.only in (None, "delivery"):
        delivery(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
