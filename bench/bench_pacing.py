"""Pacing held per receiver across two bulk worker processes.

A newsletter to three receivers with different limits and to an unlimited
fourth drains through the real processes (split relays, 2 bulk worker
processes x 8 threads, 1 high worker process) into an SMTP server on loopback
that timestamps every message; login codes to the most limited receiver are
enqueued while it drains. Printed per receiver: the configured rate, the
rate achieved from first to last send, the most sends seen in any one-second
window, and how often rows went back to Postgres for their slot.

Then a throttling receiver: the server answers 421 4.7.28 to gmail.com for
two seconds, and the achieved rate is shown before, during the lowered pace,
and after it recovered.

    python bench/bench_pacing.py
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import LOGIN, NEWS, database, forget_namespaces, machine, settings_for

from outbox import enqueue, enqueue_many
from outbox.config import Settings
from outbox.pacing.rules import Receivers
from outbox.testing.pipeline import Pipeline
from outbox.testing.sink import ACCEPT, Behaviour, SmtpSink

LIMITS = "gmail.com=20/s, outlook.com=10/s, yahoo.com=5/s"
MIX = {  # recipients per domain; gmail.com and googlemail.com are one receiver
    "gmail.com": 400,
    "googlemail.com": 200,
    "hotmail.com": 150,
    "outlook.com": 150,
    "yahoo.com": 150,
    "example.org": 1500,
}
CONFIGURED = {"gmail.com": 20.0, "outlook.com": 10.0, "yahoo.com": 5.0}


def recipients(mix: dict[str, int], scale: float) -> Iterator[dict[str, Any]]:
    for domain, count in mix.items():
        for i in range(max(1, int(count * scale))):
            yield {
                "idempotency_key": f"nl-{domain}-{i}",
                "to": f"reader{i}@{domain}",
                "template": "newsletter",
                "params": NEWS,
            }


def most_in_one_second(times: list[float]) -> int:
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        best = max(best, end - start + 1)
    return best


def add_login(settings: Settings, index: int) -> None:
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn,
            idempotency_key=f"login-{index}",
            to=f"user{index}@gmail.com",
            template="login_code",
            params=LOGIN,
            priority="high",
            settings=settings,
        )
        conn.commit()


def drain(settings: Settings, sink: SmtpSink, expected: int, logins: int) -> float:
    """Run the processes until ``expected`` messages arrived; enqueue codes meanwhile."""
    env = {**settings.to_env(), "OUTBOX_LOG_LEVEL": "WARNING"}
    started = time.monotonic()
    with Pipeline(env, high=(1, 2), bulk=(2, 8), split_relays=True):
        time.sleep(3)  # workers start; the receivers' budgets are in use
        for index in range(logins):
            add_login(settings, index)
            time.sleep(0.5)
        deadline = time.monotonic() + 600
        while len(sink.messages) < expected + logins and time.monotonic() < deadline:
            time.sleep(0.2)
    return time.monotonic() - started


def report_receivers(settings: Settings, sink: SmtpSink) -> None:
    receivers = Receivers.parse()
    times: dict[str, list[float]] = defaultdict(list)
    for message in sink.messages:
        if message.recipients[0].startswith("user"):
            continue  # the login codes are reported apart
        times[receivers.of(message.recipients[0])].append(message.at)
    with psycopg.connect(settings.database_url) as conn:
        paced = dict(
            conn.execute(  # type: ignore[arg-type]
                "SELECT split_part(reason, ' ', 2), count(*) FROM email_event"
                " WHERE reason LIKE 'paced:%%' GROUP BY 1"
            ).fetchall()
        )
        attempts = conn.execute(
            "SELECT max(attempt) FROM email_attempt WHERE verdict = 'sent'"
        ).fetchone()
    # While the unlimited receiver drains, the two cores are saturated and
    # sends that start on their slots arrive bunched; after it, they do not.
    first = min(m.at for m in sink.messages)
    busy_until = max(times.pop("example.org", [0.0]))
    print(
        f"  {'receiver':<12} {'sent':>5} {'limit':>8} {'achieved':>9} {'max in 1 s':>11}"
        f" {'(CPU busy / idle)':>18} {'went back':>10}"
    )
    for receiver, at in sorted(times.items()):
        span = max(at) - min(at)
        achieved = (len(at) - 1) / span if span > 0 else float("inf")
        limit = CONFIGURED.get(receiver)
        busy = most_in_one_second([t for t in at if t <= busy_until])
        idle = most_in_one_second([t for t in at if t > busy_until + 0.5])
        print(
            f"  {receiver:<12} {len(at):>5} {f'{limit:g}/s' if limit else '-':>8}"
            f" {achieved:>7.1f}/s {most_in_one_second(at):>11} {f'{busy} / {idle}':>18}"
            f" {paced.get(receiver, 0):>10}"
        )
    print(f"  highest attempt number of a sent row: {attempts[0] if attempts else '-'}")
    drained = busy_until - first
    print(f"  the unlimited receiver (example.org) drained {drained:.1f} s after the first send")


def report_logins(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as conn:
        latencies = sorted(
            float(r[0]) * 1000
            for r in conn.execute(
                "SELECT extract(epoch FROM sent_at - created_at) FROM email_outbox"
                " WHERE priority = 'high' AND status = 'sent'"
            )
        )
    if not latencies:
        print("  no login code was sent")
        return
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    print(
        f"  login codes to gmail.com during the drain: {len(latencies)};"
        f" commit -> sent p50 {q[49]:.0f} ms, p90 {q[89]:.0f} ms, max {latencies[-1]:.0f} ms"
    )


def bench_limits(scale: float, logins: int) -> None:
    expected = sum(max(1, int(c * scale)) for c in MIX.values())
    print(f"\n## Pacing: {expected} newsletter emails, limits {LIMITS}, *: unlimited")
    with database("pacing") as url, SmtpSink() as sink:
        settings = settings_for(url, sink.url, rate_limits=LIMITS)
        with psycopg.connect(url) as conn:
            enqueue_many(conn, recipients(MIX, scale), settings=settings)
            conn.commit()
        elapsed = drain(settings, sink, expected, logins)
        print(f"  drained in {elapsed:.1f} s (2 bulk worker processes x 8 threads)")
        report_receivers(settings, sink)
        report_logins(settings)


def bench_throttle(seconds: float) -> None:
    print("\n## Adaptive pace: 421 4.7.28 from gmail.com for 2 s, recovery over 20 s")
    refusing = threading.Event()

    def behaviour(address: str) -> Behaviour:
        if refusing.is_set() and address.endswith("@gmail.com"):
            return Behaviour(rcpt_reply="421 4.7.28 Unusual rate of unsolicited mail")
        return ACCEPT

    with database("throttle") as url, SmtpSink(behaviour) as sink:
        settings = dataclasses.replace(
            settings_for(url, sink.url, rate_limits="gmail.com=20/s"),
            pace_recovery_seconds=20.0,
        )
        count = int(20 * seconds)
        with psycopg.connect(url) as conn:
            enqueue_many(conn, recipients({"gmail.com": count}, 1.0), settings=settings)
            conn.commit()
        env = {**settings.to_env(), "OUTBOX_LOG_LEVEL": "WARNING"}
        with Pipeline(env, high=(0, 0), bulk=(2, 8), split_relays=True):
            while len(sink.messages) < 80:
                time.sleep(0.05)
            cut_at = time.monotonic()
            refusing.set()
            time.sleep(2)
            refusing.clear()
            deadline = time.monotonic() + 600
            while len(sink.messages) < count and time.monotonic() < deadline:
                time.sleep(0.2)
        times = [m.at for m in sink.messages]
    windows = [(-3, 0), (0, 2), (2, 6), (6, 10), (10, 14), (14, 18), (18, 22), (22, 26)]
    for start, end in windows:
        n = sum(1 for t in times if cut_at + start <= t < cut_at + end)
        print(f"  {start:>+4} .. {end:>+3} s around the first 421: {n / (end - start):5.1f}/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="share of the newsletter to send")
    parser.add_argument("--logins", type=int, default=20)
    parser.add_argument("--throttle-seconds", type=float, default=40.0)
    args = parser.parse_args()
    print(machine())
    try:
        bench_limits(args.scale, args.logins)
        bench_throttle(args.throttle_seconds)
    finally:
        forget_namespaces()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
