"""What recording each bulk result as it arrives costs, against one write per batch.

A kill -9 of a bulk worker used to resend up to a whole batch (25 rows) per
thread, because a batch's results were written in one statement after all its
sends. Now each result is journaled in Redis the moment its reply arrives
(one command handed to the kernel, no reply awaited), and the sweeper
records a dead process's journal instead of resending it; at a batch's end
its thread records in Postgres every result the process holds by then. This drains the
same newsletter with 8 threads in this process, alternating rounds of the old
way (the same delivery, results written once per batch, nothing journaled)
and the new one, in pairs run back to back (each pair's order in turn), and
gives the median of the pairs' differences in throughput and in the CPU the
whole machine spent per email:

    python -m bench.bench_result_writes [--emails 4000] [--rounds 15 (pairs)] [--threads 8]
        [--relay sink|postfix]

Rounds on a shared 2-core machine differ by a fifth from one to the next, so a
few pairs cannot tell a cost of 5 % from one of 10 %: the median comes with a
90 % interval (the pairs resampled), and only a bound the interval clears is
reported as met or missed.

`sink` is Postfix's smtp-sink, which answers at once and stores nothing: the
worst case for anything added per message. `postfix` is a real Postfix on
loopback that, like any relay, writes each message to its queue and syncs it
to disk before it answers 250, then discards it (no onward delivery).
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import statistics
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg_pool import ConnectionPool

from bench.run import database, smtp_sink
from outbox import enqueue_many
from outbox.config import Settings
from outbox.db.store import results, sending
from outbox.delivery.deliver import Delivery, worker_name
from outbox.models import Priority
from outbox.relay.loop import Relay
from outbox.testing.postfix import private_postfix
from outbox.transports.smtp import SmtpConfig, SmtpTransport

NEWS = {"name": "R", "title": "News", "intro": "Hi", "url": "https://x.example"}
TARGET = 5.0  # per cent of throughput at most
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


class BatchDelivery(Delivery):
    """The old way: every result of a broker message written in one statement at its end."""

    def deliver(self, ids: Sequence[int]) -> None:
        worker = worker_name()  # nothing journaled: the old way had no journal
        with self.pool.connection() as conn:
            rows = sending.take_for_sending(conn, ids, worker)
        records = []
        for row in rows:
            # The same gate per row as the new way: only the recording differs.
            if not self._may_send(worker):
                raise RuntimeError("the transport's breaker opened during the benchmark")
            result = self._attempt(row, worker)
            assert isinstance(result, results.AttemptRecord)
            records.append(result)
        with self.pool.connection() as conn:
            results.record_results(conn, [(worker, r) for r in records])


# Accept from loopback for any domain, queue (and fsync) it, then throw it away.
DISCARD_CF = """\
myhostname = relay.bench.example
mydestination =
default_transport = discard:bench
relay_transport = discard:bench
smtpd_recipient_restrictions = permit_mynetworks, reject
default_process_limit = 200
"""


@contextmanager
def relay(kind: str) -> Iterator[tuple[str, str]]:
    if kind == "sink":
        with smtp_sink() as sink:
            yield sink
        return
    with private_postfix(DISCARD_CF) as postfix:
        yield postfix.url, "Postfix smtpd (queued, fsynced, discarded)"


def busy_seconds() -> float:
    """CPU time every process on this machine has used so far (``/proc/stat``)."""
    with open("/proc/stat") as stat:
        ticks = [int(x) for x in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Round:
    rate: float  # emails per second from the first send to the last row recorded
    cpu_us: float  # CPU of the whole machine per email meanwhile (workers, Postgres, Redis, relay)


def one_round(settings: Settings, kind: type[Delivery], emails: int, threads: int) -> Round:
    """One drain of a fresh newsletter, timed from the first send to the last row recorded."""
    with psycopg.connect(settings.database_url) as conn:
        conn.execute("TRUNCATE email_outbox, email_attempt, email_event")
        enqueue_many(
            conn,
            (
                {
                    "idempotency_key": f"{uuid.uuid4().hex}",
                    "to": f"r{i}@example.org",
                    "template": "newsletter",
                    "params": NEWS,
                    "priority": "bulk",
                }
                for i in range(emails)
            ),
            settings=settings,
        )
        conn.commit()
    groups: queue.Queue[list[int]] = queue.Queue()

    def publish(priority: Priority, batch: Sequence[Sequence[int]]) -> None:
        for ids in batch:
            groups.put(list(ids))

    with ConnectionPool(settings.database_url, min_size=threads + 2, max_size=threads + 4) as pool:
        relay = Relay(settings, pool, publish, priorities=[Priority.BULK])
        while relay.run_round().published:
            pass
        with pool.connection() as conn:
            # What autovacuum does on a live outbox: without it (and this machine's
            # Postgres runs without), the planner still sees the truncated table.
            conn.execute("ANALYZE email_outbox")
        transport = SmtpTransport(SmtpConfig.from_settings(settings))
        delivery = kind(settings, pool, transport)
        started = time.perf_counter()
        cpu_before = busy_seconds()

        def work() -> None:
            while True:
                try:
                    ids = groups.get_nowait()
                except queue.Empty:
                    return
                delivery.deliver(ids)

        workers = [threading.Thread(target=work) for _ in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        took = time.perf_counter() - started
        cpu = busy_seconds() - cpu_before
        # Its writer thread and connections end with the round: left behind, each
        # round's idle writer slowed every later round of the new way (2,000 to
        # 1,600 emails/s over ten rounds here), not the old way's, which has none.
        delivery.close()
        transport.close()
    with psycopg.connect(settings.database_url) as conn:
        row = conn.execute("SELECT count(*) FROM email_outbox WHERE status = 'sent'").fetchone()
    assert row is not None
    assert row[0] == emails, f"{row[0]} of {emails} sent"
    return Round(emails / took, cpu / emails * 1e6)


def median_interval(
    values: Sequence[float], *, level: float = 0.90, draws: int = 4000, seed: int = 1
) -> tuple[float, float]:
    """A bootstrap interval for the median of ``values``: the ``level`` middle of
    the medians of ``draws`` resamples (with replacement) of the same size."""
    if len(values) < 2:
        return values[0], values[0]
    rng = random.Random(seed)  # the same pairs give the same interval
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    tail = (1 - level) / 2
    return medians[int(tail * draws)], medians[min(draws - 1, int((1 - tail) * draws))]


def verdict(interval: tuple[float, float], target: float) -> str:
    """Met, missed, or not told apart from the target by these pairs."""
    low, high = interval
    if high <= target:
        return "met"
    if low > target:
        return "missed"
    return "not told apart from the target by these pairs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--emails", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--relay", choices=["sink", "postfix"], default="sink")
    args = parser.parse_args()
    with database("writes") as url, relay(args.relay) as (smtp_url, sink_kind):
        settings = Settings(
            database_url=url,
            redis_url=REDIS_URL,
            smtp_url=smtp_url,
            namespace=f"bench-{uuid.uuid4().hex[:8]}",
            max_in_flight=args.emails,
            claim_batch=args.emails,
        )
        one_round(settings, Delivery, min(args.emails, 500), args.threads)  # warm up
        pairs: list[tuple[Round, Round]] = []
        for index in range(args.rounds):
            # Each pair runs back to back, in turns first: the machine's drift
            # (other tenants, caches) falls on both sides of a pair alike.
            order = [BatchDelivery, Delivery] if index % 2 == 0 else [Delivery, BatchDelivery]
            got = {kind: one_round(settings, kind, args.emails, args.threads) for kind in order}
            pairs.append((got[BatchDelivery], got[Delivery]))
    print(f"{args.emails} bulk emails, {args.threads} threads, {sink_kind}, {args.rounds} pairs")
    for name, side in (("per batch (old)", 0), ("as they arrive (new)", 1)):
        rates = [pair[side].rate for pair in pairs]
        cpus = [pair[side].cpu_us for pair in pairs]
        shown = ", ".join(f"{v:.0f}" for v in rates)
        print(
            f"  results written {name:<22} median {statistics.median(rates):6.0f}/s,"
            f" {statistics.median(cpus):5.0f} µs CPU per email ({shown})"
        )
    costs = sorted((old.rate - new.rate) / old.rate * 100 for old, new in pairs)
    cpu = statistics.median((new.cpu_us - old.cpu_us) / old.cpu_us * 100 for old, new in pairs)
    low, high = median_interval(costs)
    print(
        f"  throughput cost, median of pairs: {statistics.median(costs):+.1f} %"
        f" (90 % interval {low:+.1f} to {high:+.1f} %); target at most {TARGET:.0f} %:"
        f" {verdict((low, high), TARGET)}"
    )
    print(f"  CPU per email, median of pairs: {cpu:+.1f} %")


if __name__ == "__main__":
    main()
