"""Enqueue on every driver, and the HTTP API: figures on stdout.

1. Each adapter's single ``enqueue`` against one raw parameterised INSERT of
   the same columns on the same driver and connection, alternating rounds in
   one run: 200 statements per transaction, so the figure is the statement's
   cost (validation, building, the suppression check, the driver), not the
   commit's (6-9 ms on this machine's disk).
2. The HTTP API (``outbox web`` as its own process, on loopback): accepted
   emails per second over keep-alive connections, each email its own
   transaction; then latency at half that rate; then the batch endpoint.

The load generator is a few lines of asyncio over raw sockets (pre-built
HTTP/1.1 requests), so that the client costs little of the two cores.

    python bench/bench_adapters.py [--rounds 5] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg
import orjson
import psycopg
import psycopg2
import sqlalchemy
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

import outbox
from outbox import intake
from outbox.config import Settings
from outbox.db import async_executors, enqueue_statements, executors
from outbox.db.store import api_key_rows, migration_runner
from outbox.intake import checked_rows
from outbox.web import api_keys

ADMIN_URL = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
LOGIN = {"name": "Alice", "code": "482913", "product": "Outbox", "minutes": 10}
PER_TX = 200
SECRET = secrets.token_urlsafe(32)
RAW = (
    "INSERT INTO email_outbox (idempotency_key, recipient, template, params, content_hash,"
    " message_id, priority, template_version, sender) VALUES"
    " (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
RAW_DOLLAR = RAW.replace("%s", "$1", 1)
for _n in range(2, 10):
    RAW_DOLLAR = RAW_DOLLAR.replace("%s", f"${_n}", 1)


@contextmanager
def database() -> Iterator[str]:
    name = f"outbox_bench_adapters_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    url = ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(url) as conn:
        migration_runner.migrate(conn)
    try:
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


_counter = iter(range(10**9))


def raw_values() -> tuple[Any, ...]:
    n = next(_counter)
    return (f"raw-{n}", "alice@example.com", "login_code", orjson.dumps(LOGIN).decode(),
            f"h{n}", f"<raw-{n}@bench>", "high", "v", "Outbox <a@b.c>")  # fmt: skip


def email_args(settings: Settings) -> dict[str, Any]:
    n = next(_counter)
    return {"idempotency_key": f"enq-{n}", "to": "alice@example.com", "template": "login_code",
            "params": LOGIN, "settings": settings}  # fmt: skip


def per_op_us(run: Callable[[], None], commit: Callable[[], None]) -> float:
    started = time.perf_counter()
    for _ in range(PER_TX):
        run()
    elapsed = time.perf_counter() - started
    commit()
    return elapsed / PER_TX * 1e6


def prebuilt(
    settings: Settings, n: int, *, prepares: bool
) -> Iterator[enqueue_statements.Statement]:
    """enqueue's statements, validated and built beforehand (all of them before
    this returns, so none of that is timed): what the driver alone costs. A
    driver that prepares nothing gets the enqueue function's call, as enqueue
    sends it there."""
    function = enqueue_statements.enqueue_function(intake.COLUMNS, "")
    ready: dict[str, Any] = {}
    statements = []
    for _ in range(n):
        args = email_args(settings)
        row = checked_rows.validated(
            settings, key=args["idempotency_key"], to=args["to"], template_name=args["template"],
            params=args["params"], priority=None, fields=checked_rows.Fields(), ready=ready,
        )  # fmt: skip
        values = {c.field: c.value(getattr(row, c.field)) for c in intake.COLUMNS}
        built = enqueue_statements.insert_message(intake.COLUMNS, values)
        statements.append(built if prepares else function.call(values))
    return iter(statements)


def sync_case(
    name: str,
    conn: Any,
    raw: Callable[[], None],
    settings: Settings,
    commit: Callable[[], None],
    rounds: int,
) -> tuple[str, float, float, float]:
    def enqueue() -> None:
        outbox.enqueue(conn, **email_args(settings))

    executor = executors.executor_for(conn)
    built = prebuilt(settings, PER_TX * (rounds + 2), prepares=executor.prepares)

    def statement_only() -> None:
        executor.execute(next(built))

    for _ in range(2):  # warm: template version stored and known committed, statements prepared
        per_op_us(enqueue, commit)
        per_op_us(raw, commit)
        per_op_us(statement_only, commit)
    a, b, c = [], [], []
    for _ in range(rounds):
        b.append(per_op_us(raw, commit))
        c.append(per_op_us(statement_only, commit))
        a.append(per_op_us(enqueue, commit))
    return name, statistics.median(b), statistics.median(c), statistics.median(a)


async def async_per_op(run: Callable[[], Any], commit: Callable[[], Any]) -> float:
    started = time.perf_counter()
    for _ in range(PER_TX):
        await run()
    elapsed = time.perf_counter() - started
    await commit()
    return elapsed / PER_TX * 1e6


async def async_case(
    name: str,
    conn: Any,
    raw: Callable[[], Any],
    settings: Settings,
    commit: Callable[[], Any],
    rounds: int,
) -> tuple[str, float, float, float]:
    async def enqueue() -> None:
        await outbox.enqueue_async(conn, **email_args(settings))

    executor = await async_executors.executor_for(conn)
    built = prebuilt(settings, PER_TX * (rounds + 2), prepares=executor.prepares)

    async def statement_only() -> None:
        await executor.execute(next(built))

    for _ in range(2):
        await async_per_op(enqueue, commit)
        await async_per_op(raw, commit)
        await async_per_op(statement_only, commit)
    a, b, c = [], [], []
    for _ in range(rounds):
        b.append(await async_per_op(raw, commit))
        c.append(await async_per_op(statement_only, commit))
        a.append(await async_per_op(enqueue, commit))
    return name, statistics.median(b), statistics.median(c), statistics.median(a)


def adapters(url: str, settings: Settings, rounds: int) -> list[tuple[str, float, float, float]]:
    results = []
    with psycopg.connect(url) as conn:
        results.append(sync_case("psycopg 3", conn, lambda: conn.execute(RAW, raw_values()),
                                 settings, conn.commit, rounds))  # fmt: skip
    p2 = psycopg2.connect(url)
    cur2 = p2.cursor()
    results.append(sync_case("psycopg2", p2, lambda: cur2.execute(RAW, raw_values()),
                             settings, p2.commit, rounds))  # fmt: skip
    p2.close()
    for driver in ("psycopg", "psycopg2"):
        engine = sqlalchemy.create_engine(url.replace("postgresql://", f"postgresql+{driver}://"),
                                          poolclass=NullPool)  # fmt: skip
        with engine.connect() as sa:
            results.append(sync_case(
                f"SQLAlchemy Connection ({driver})", sa,
                lambda sa=sa: sa.exec_driver_sql(RAW, raw_values()), settings, sa.commit, rounds,
            ))  # fmt: skip
        engine.dispose()

    async def run_async() -> None:
        aconn = await psycopg.AsyncConnection.connect(url)
        results.append(await async_case(
            "psycopg 3 AsyncConnection", aconn, lambda: aconn.execute(RAW, raw_values()),
            settings, aconn.commit, rounds,
        ))  # fmt: skip
        await aconn.close()
        apg = await asyncpg.connect(url)
        tx: dict[str, Any] = {"t": apg.transaction()}
        await tx["t"].start()

        async def apg_commit() -> None:
            await tx["t"].commit()
            tx["t"] = apg.transaction()
            await tx["t"].start()

        results.append(await async_case(
            "asyncpg", apg, lambda: apg.execute(RAW_DOLLAR, *raw_values()), settings,
            apg_commit, rounds,
        ))  # fmt: skip
        await tx["t"].rollback()
        await apg.close()
        engine = create_async_engine(url.replace("postgresql://", "postgresql+asyncpg://"),
                                     poolclass=NullPool)  # fmt: skip
        async with engine.connect() as sa:
            results.append(await async_case(
                "SQLAlchemy AsyncConnection (asyncpg)", sa,
                lambda: sa.exec_driver_sql(RAW_DOLLAR, raw_values()), settings, sa.commit, rounds,
            ))  # fmt: skip
        await engine.dispose()

    asyncio.run(run_async())
    return results


# --- the HTTP API ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def web_server(url: str, pool_size: int) -> Iterator[tuple[int, str]]:
    token = api_keys.new_token()
    with psycopg.connect(url) as conn:
        api_key_rows.create_api_key(conn, name="bench", token_hash=api_keys.token_hash(token),
                             prefix=api_keys.shown_prefix(token), scopes=["send"])  # fmt: skip
        conn.commit()
    port = free_port()
    env = {**os.environ, "DATABASE_URL": url, "OUTBOX_API_RATE": "1000000",
           "OUTBOX_API_BURST": "1000000", "OUTBOX_SECRET": SECRET,
           "OUTBOX_WEB_POOL_SIZE": str(pool_size)}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "outbox.cli", "web", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield port, token
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def request(port: int, token: str, path: str, body: bytes, key: str | None) -> bytes:
    headers = [
        f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Authorization: Bearer {token}",
        "Content-Type: application/json", f"Content-Length: {len(body)}",
    ]  # fmt: skip
    if key:
        headers.append(f"Idempotency-Key: {key}")
    return ("\r\n".join(headers) + "\r\n\r\n").encode() + body


async def one_call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes) -> int:
    writer.write(data)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return status


EMAIL = orjson.dumps({"to": "alice@example.com", "template": "login_code", "params": LOGIN})


async def closed_loop(port: int, token: str, seconds: float, connections: int) -> tuple[int, int]:
    stop = time.monotonic() + seconds
    accepted = errors = 0

    async def worker(w: int) -> None:
        nonlocal accepted, errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        n = 0
        while time.monotonic() < stop:
            n += 1
            data = request(port, token, "/v1/emails", EMAIL, f"cl-{w}-{n}-{uuid.uuid4().hex[:6]}")
            if await one_call(reader, writer, data) == 202:
                accepted += 1
            else:
                errors += 1
        writer.close()

    await asyncio.gather(*(worker(w) for w in range(connections)))
    return accepted, errors


async def open_loop(
    port: int, token: str, rate: float, seconds: float, connections: int
) -> list[float]:
    """Requests at a fixed rate, spread over keep-alive connections; latency of each."""
    latencies: list[float] = []
    queue: asyncio.Queue[float | None] = asyncio.Queue()

    async def worker(w: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        n = 0
        while (due := await queue.get()) is not None:
            n += 1
            data = request(port, token, "/v1/emails", EMAIL, f"ol-{w}-{n}-{uuid.uuid4().hex[:6]}")
            status = await one_call(reader, writer, data)
            if status == 202:
                latencies.append(time.perf_counter() - due)  # from when it was due: no omission
        writer.close()

    workers = [asyncio.create_task(worker(w)) for w in range(connections)]
    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait(due)
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    return latencies


async def batches(port: int, token: str, seconds: float, connections: int, size: int = 1000) -> int:
    stop = time.monotonic() + seconds
    accepted = 0

    async def worker(w: int) -> None:
        nonlocal accepted
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        n = 0
        while time.monotonic() < stop:
            n += 1
            tag = f"b-{w}-{n}-{uuid.uuid4().hex[:6]}"
            emails = [{"idempotency_key": f"{tag}-{i}", "to": f"r{i}@example.com",
                       "template": "login_code", "params": LOGIN} for i in range(size)]  # fmt: skip
            body = orjson.dumps({"emails": emails})
            if (
                await one_call(reader, writer, request(port, token, "/v1/emails/batch", body, None))
                == 202
            ):
                accepted += size
        writer.close()

    started = time.monotonic()
    await asyncio.gather(*(worker(w) for w in range(connections)))
    return int(accepted / (time.monotonic() - started))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--api-only", action="store_true", help="only the HTTP API figures")
    parser.add_argument("--pool", type=int, default=40, help="OUTBOX_WEB_POOL_SIZE of outbox web")
    args = parser.parse_args()
    machine = platform.processor() or platform.machine()
    print(
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {machine}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}"
    )
    with database() as url:
        settings = Settings(database_url=url, secret=SECRET)
        if not args.api_only:
            print(f"\n## single enqueue vs one raw INSERT, µs per statement ({PER_TX} per tx)")
            print("| driver | raw INSERT | enqueue's statement, built first | enqueue | more |")
            print("|---|---|---|---|---|")
            for name, raw, built, enq in adapters(url, settings, args.rounds):
                more = 100 * (enq / raw - 1)
                print(f"| {name} | {raw:.0f} | {built:.0f} | {enq:.0f} | {more:+.0f} % |")
        with web_server(url, args.pool) as (port, token):
            asyncio.run(closed_loop(port, token, 2, 4))  # warm
            accepted, errors = asyncio.run(closed_loop(port, token, args.seconds, args.connections))
            rate = accepted / args.seconds
            print(f"\n## HTTP API, {args.connections} keep-alive connections, {args.seconds:g} s")
            print(f"POST /v1/emails accepted: {rate:.0f} emails/s ({errors} not 202)")
            half = rate / 2
            lat = sorted(asyncio.run(open_loop(port, token, half, args.seconds, args.connections)))
            q = statistics.quantiles(lat, n=100)
            print(f"at {half:.0f}/s: p50 {q[49] * 1e3:.1f} ms, p99 {q[98] * 1e3:.1f} ms,"
                  f" max {lat[-1] * 1e3:.1f} ms ({len(lat)} requests)")  # fmt: skip
            per_s = asyncio.run(batches(port, token, args.seconds, 2))
            print(f"POST /v1/emails/batch (1,000 per request, 2 connections): {per_s} emails/s")


if __name__ == "__main__":
    main()
