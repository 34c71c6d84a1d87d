"""Each result kept outside the worker process before its thread's next send.

A worker killed with SIGKILL resends what it had sent and not yet recorded.
Writing every result to Postgres before the thread's next end-of-data dot
keeps that to one message per thread, but costs a statement (and a commit)
per handful of results, and the dot waits for it. Instead each result is
journaled in Redis the moment its reply arrives: one command sent on the
thread's own connection, with replies switched off (``CLIENT REPLY OFF``), so
the thread never waits for Redis; once ``send`` has returned the bytes are in
the kernel, and a process killed then still delivers them (nothing unread
in the socket, so it closes in order). The results go on to Postgres in
groups, and the thread drops its journal once its batch is recorded.

The sweeper (:meth:`ResultJournal.recover`) applies what a silent process
journaled before it marks that process's rows uncertain, so a kill -9
resends only the message a thread had in flight.

Redis without persistence loses the journal on a restart: that only matters
if a worker dies in the same moment, and costs duplicates, never an email.
When Redis cannot be reached, the thread falls back to waiting for
Postgres before its next dot (:class:`outbox.delivery.writer.ResultWriter`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from outbox.db import store
from outbox.telemetry.outages import DownOnce

log = logging.getLogger(__name__)

# A journal left behind by a process that died where nothing swept it (its rows
# were swept by another outbox, the namespace was dropped) expires on its own.
_KEEP_SECONDS = 7 * 24 * 3600
_SCAN_COUNT = 200
_RETRY_SECONDS = 1.0


def journal_key(namespace: str, worker: str) -> str:
    """The Redis hash of one worker thread's results (``host:pid:thread``)."""
    return f"{namespace}:results:{worker}"


def resp(*args: bytes) -> bytes:
    """One command in Redis' wire format (RESP): an array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        parts += (b"$%d\r\n" % len(arg), arg, b"\r\n")
    return b"".join(parts)


def encode(record: store.AttemptRecord) -> bytes:
    return orjson.dumps(record)  # orjson writes dataclasses natively


def decode(worker: str, raw: bytes) -> tuple[str, store.AttemptRecord] | None:
    """A journaled result, or None for one this version cannot read."""
    try:
        fields = orjson.loads(raw)
        return worker, store.AttemptRecord(**fields)
    except (orjson.JSONDecodeError, TypeError):
        return None


class ResultJournal:
    def __init__(self, redis_url: str, namespace: str) -> None:
        self.redis_url = redis_url
        self.namespace = namespace
        self._local = threading.local()
        self._pool = redis.ConnectionPool.from_url(
            redis_url, socket_timeout=2, socket_connect_timeout=2
        )
        self._retry_at = 0.0  # after a failure, no thread tries Redis again before this
        self.redis = DownOnce(log, "Redis (journaling results)")
        self.sweeper = DownOnce(log, "Redis (reading journaled results)")

    def _connection(self) -> Any:  # redis-py's connections are untyped
        conn: Any = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._pool.make_connection()
            conn.connect()
            conn.send_command("CLIENT", "REPLY", "OFF")
            self._local.conn = conn
        return conn

    def _send(self, *commands: tuple[bytes, ...]) -> bool:
        """Hand commands to the kernel for Redis; False when they could not be."""
        if time.monotonic() < self._retry_at:
            return False  # Redis failed a moment ago: no connect timeout per message
        try:
            conn = self._connection()
            conn.send_packed_command([b"".join(resp(*c) for c in commands)], check_health=False)
        except (redis.RedisError, OSError) as exc:
            self._drop()
            self._retry_at = time.monotonic() + _RETRY_SECONDS
            self.redis.failed(exc)
            return False
        if self.redis.is_down:  # read without its lock: ok() takes it only after an outage
            self.redis.ok()
        return True

    def _drop(self) -> None:
        conn: Any = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.disconnect()

    def record(self, worker: str, record: store.AttemptRecord) -> bool:
        """Journal one result; False if it is not, and the caller must wait for Postgres."""
        key = journal_key(self.namespace, worker).encode()
        try:
            entry = (b"HSET", key, b"%d" % record.id, encode(record))
        except orjson.JSONEncodeError:
            return False  # a reply with a lone surrogate: Postgres first (it is made storable)
        if getattr(self._local, "dirty", False):
            return self._send(entry)
        self._local.dirty = self._send(entry, (b"EXPIRE", key, b"%d" % _KEEP_SECONDS))
        return bool(self._local.dirty)

    def clear(self, worker: str) -> None:
        """Drop a thread's journal once every result in it is in Postgres."""
        if getattr(self._local, "dirty", False):
            key = journal_key(self.namespace, worker).encode()
            self._local.dirty = not self._send((b"DEL", key))

    def close(self) -> None:
        self._drop()

    # The sweeper's side: an ordinary client, replies on.

    def _client(self) -> redis.Redis:
        client: redis.Redis | None = getattr(self, "_sweeper_client", None)
        if client is None:
            # No retries inside redis-py: a sweep that cannot read journals goes on without.
            client = redis.Redis.from_url(
                self.redis_url,
                socket_timeout=2,
                socket_connect_timeout=2,
                retry=Retry(NoBackoff(), 0),
            )
            self._sweeper_client = client
        return client

    def journaled(self) -> Iterator[tuple[str, list[bytes]]]:
        """(worker, raw results) of every journal in this namespace."""
        client = self._client()
        prefix = journal_key(self.namespace, "")
        for key in client.scan_iter(match=f"{prefix}*", count=_SCAN_COUNT):
            name = key.decode() if isinstance(key, bytes) else str(key)
            values: list[bytes] = client.hvals(name)  # type: ignore[assignment]
            yield name.removeprefix(prefix), values

    def recover(self, conn: store.Conn, *, stuck_seconds: float) -> Recovered:
        """Record the journaled results of silent processes whose rows they still
        hold, in the caller's transaction (before its sweep); the caller drops
        the journals left with nothing to apply once it has committed.

        Without Redis the sweep goes on: those rows are swept as uncertain, as
        they would be without a journal.
        """
        results: list[tuple[str, store.AttemptRecord]] = []
        workers: set[str] = set()
        try:
            for worker, values in self.journaled():
                workers.add(worker)
                for raw in values:
                    decoded = decode(worker, raw)
                    if decoded is None:
                        log.warning("a journaled result of %s is unreadable; left out", worker)
                        continue
                    results.append(decoded)
        except redis.RedisError as exc:
            self.sweeper.failed(exc)
            return Recovered(0, [])
        self.sweeper.ok()
        if not workers:
            return Recovered(0, [])
        recorded = store.recover_journaled(conn, results, stuck_seconds=stuck_seconds)
        done = store.finished_journals(conn, results, sorted(workers), stuck_seconds=stuck_seconds)
        return Recovered(recorded, done)

    def drop(self, workers: Sequence[str]) -> None:
        """Delete these threads' journals (after the sweep that read them committed)."""
        if workers:
            with contextlib.suppress(redis.RedisError):  # tried again at the next sweep
                self._client().delete(*(journal_key(self.namespace, w) for w in workers))


@dataclass(frozen=True, slots=True)
class Recovered:
    recorded: int  # rows whose journaled result was recorded instead of swept
    finished: list[str]  # journaling threads of silent processes with nothing left
