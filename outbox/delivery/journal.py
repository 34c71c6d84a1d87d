"""Each result kept outside the worker process before its thread's next send.

A worker killed with SIGKILL resends what it had sent and not yet recorded.
Writing every result to Postgres before the thread's next end-of-data dot
keeps that to one message per thread, but costs a statement (and a commit)
per handful of results, and the dot waits for it. Instead each result is
journaled in Redis before its thread's next dot: :meth:`ResultJournal.add`
puts it in the process's buffer, and :meth:`ResultJournal.ensure`, called
just before that dot, encodes and hands the buffer to the kernel if no other
thread has done so meanwhile. Replies are switched off (``CLIENT REPLY OFF``), so no
thread waits for Redis; once ``send`` has returned the bytes are in the
kernel, and a process killed then still delivers them (nothing unread in the
socket, so it closes in order). Between a reply and the next dot lie the
next message's building and its envelope's round trips, in which the other
threads' dots usually carry the result along: one send carries several
threads' results, and Redis reads them in one event. A result waits in the
buffer only while its thread has not sent again, so a kill still resends at
most one message per thread. Each process journals into one hash, by row
id; the results go on to Postgres in groups, and a thread drops its batch's
entries once the batch is recorded.

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
import functools
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from outbox.db import store
from outbox.delivery import locked_send
from outbox.telemetry.outages import DownOnce

log = logging.getLogger(__name__)

# A journal left behind by a process that died where nothing swept it (its rows
# were swept by another outbox, the namespace was dropped) expires on its own.
_KEEP_SECONDS = 7 * 24 * 3600
_SCAN_COUNT = 200
_RETRY_SECONDS = 1.0
_SEND_SECONDS = 2.0  # as the socket's timeout was


def process_of(worker: str) -> str:
    """The process (``host:pid``) of a worker thread (``host:pid:thread``)."""
    host, pid, _ = worker.split(":", 2)
    return f"{host}:{pid}"


def journal_key(namespace: str, process: str) -> str:
    """The Redis hash of one worker process's results (``host:pid``), by row id."""
    return f"{namespace}:results:{process}"


def resp(*args: bytes) -> bytes:
    """One command in Redis' wire format (RESP): an array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        parts += (b"$%d\r\n" % len(arg), arg, b"\r\n")
    return b"".join(parts)


def encode(worker: str, record: store.AttemptRecord) -> bytes:
    """An entry: the result as Postgres records it (:func:`outbox.db.store.result_entry`)."""
    return store.result_entry(worker, record)


def journal_entry(worker: str, record: store.AttemptRecord) -> bytes | None:
    """The result as the journal keeps it and Postgres records it; None if it
    cannot be JSON even made storable (then it goes to Postgres alone, first)."""
    try:
        return encode(worker, record)
    except orjson.JSONEncodeError:
        return None


def decode(raw: bytes) -> tuple[str, store.AttemptRecord] | None:
    """A journaled (worker thread, result), or None for one this version cannot read.

    Entries are the arrays :func:`encode` makes; an object of the same fields
    and a ``[worker, fields]`` pair are what earlier versions journaled, still
    in Redis after an upgrade."""
    try:
        value = orjson.loads(raw)
        if isinstance(value, list) and len(value) == len(store.ENTRY_FIELDS):
            worker, *values = value
            fields = dict(zip(store.ENTRY_FIELDS[1:], values, strict=True))
        elif isinstance(value, dict):
            worker = value.pop("worker", None)
            fields = value
        elif isinstance(value, list) and len(value) == 2:
            worker, fields = value
        else:
            return None
        if not isinstance(worker, str) or not isinstance(fields, dict):
            return None
        return worker, store.AttemptRecord(**fields)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None


def commands(
    buffered: Sequence[Journaled | Drop],
    key_of: Callable[[str], bytes],
    armed: set[bytes],
) -> bytes:
    """The buffer as Redis commands, in order, each result encoded on the way
    (once: an item the writer encoded first keeps its entry). Each run of
    results for one key is one ``HSET`` (Redis reads and answers one command,
    not one per result); a drop is an ``HDEL`` and ends a run. A result that
    cannot be JSON even made storable is left out, its ``entry`` None: its
    thread waits for Postgres instead (:meth:`ResultJournal.ensure`).

    ``armed`` holds the keys whose expiry is set since their last drop, and is
    kept so: a drop may empty a hash, which deletes it, and the ``HSET`` that
    makes it again is followed by an ``EXPIRE``; a key still there keeps its
    expiry, so most sends carry none.

    Built on the sending thread with the interpreter lock held, before every
    end-of-data dot: one pass, one formatting per result, a key's parts made once.
    """
    out: list[bytes] = []
    pairs: list[bytes] = []  # of the HSET being gathered, for run_key
    run_key = b""
    for item in buffered:
        if isinstance(item, Drop):
            if pairs:
                _hset(out, run_key, pairs, armed)
                pairs = []
            key = key_of(item.worker)
            ids = item.ids.split(b" ")
            out.append(b"*%d\r\n$4\r\nHDEL\r\n%b" % (len(ids) + 2, _bulk(key)))
            out.extend(b"$%d\r\n%b\r\n" % (len(x), x) for x in ids)
            armed.discard(key)
            continue
        record = item.record
        entry = item.entry
        if entry is None:
            if not isinstance(record, store.AttemptRecord):
                continue  # a row handed back untried: Postgres alone records it
            try:  # journal_entry, a call less per result: this loop runs cold
                entry = item.entry = store.result_entry(item.worker, record)
            except orjson.JSONEncodeError:
                continue
        key = key_of(item.worker)
        if key != run_key:
            if pairs:
                _hset(out, run_key, pairs, armed)
                pairs = []
            run_key = key
        field = b"%d" % record.id
        pairs.append(b"$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(field), field, len(entry), entry))
    if pairs:
        _hset(out, run_key, pairs, armed)
    return b"".join(out)


def _hset(out: list[bytes], key: bytes, pairs: list[bytes], armed: set[bytes]) -> None:
    out.append(b"*%d\r\n$4\r\nHSET\r\n%b" % (2 + 2 * len(pairs), _bulk(key)))
    out.extend(pairs)
    if key not in armed:
        out.append(_expire(key))
        armed.add(key)


@functools.lru_cache(maxsize=64)
def _bulk(key: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(key), key)


@functools.lru_cache(maxsize=64)
def _expire(key: bytes) -> bytes:
    return resp(b"EXPIRE", key, b"%d" % _KEEP_SECONDS)


class Journaled(Protocol):
    """A result as the journal buffers it (the writer's item): encoded when it is
    sent, in one loop with the others the send carries, and ``entry`` set then,
    so the writer records the same bytes. Encoding each result the moment its
    reply came, amid the interpreter's other work, took 15 µs a result against
    6 µs in a loop (measured on a drain of 16,000 emails with 8 threads)."""

    @property
    def worker(self) -> str: ...

    @property
    def record(self) -> store.AttemptRecord | store.Unattempted: ...

    entry: bytes | None


class _Held:
    """A result journaled on its own (:meth:`ResultJournal.record`), not via a writer."""

    __slots__ = ("entry", "record", "worker")

    def __init__(self, worker: str, record: store.AttemptRecord, entry: bytes) -> None:
        self.worker = worker
        self.record = record
        self.entry: bytes | None = entry


class Drop:
    """Results of a thread's to drop from its journal (space-separated row ids)."""

    __slots__ = ("ids", "worker")

    def __init__(self, worker: str, ids: bytes) -> None:
        self.worker = worker
        self.ids = ids


class Ticket:
    """The results buffered between two sends, on their way to Redis: ``sent`` is
    None while they wait in the buffer, then True once they are in the kernel,
    False if they never will be. One per send, shared by the results it carries."""

    __slots__ = ("sent",)

    def __init__(self, sent: bool | None = None) -> None:
        self.sent = sent


_LOST = Ticket(sent=False)


class ResultJournal:
    def __init__(self, redis_url: str, namespace: str) -> None:
        self.redis_url = redis_url
        self.namespace = namespace
        self._pool = redis.ConnectionPool.from_url(
            redis_url, socket_timeout=2, socket_connect_timeout=2
        )
        self._conn: Any = None  # one connection per process, replies off
        self._sock: socket.socket | None = None  # its socket, non-blocking, unless TLS
        self._keys: dict[str, bytes] = {}  # worker thread -> its process's journal
        # Results to journal and drops, in order; encoded when they are sent.
        self._buffer: list[Journaled | Drop] = []
        self._ticket = Ticket()  # of what the buffer holds now
        self._armed: set[bytes] = set()  # keys with their expiry set (commands), on this connection
        self._buffer_lock = threading.Lock()  # taken for a list append, never for I/O
        self._send_lock = threading.Lock()  # one send at a time, in buffer order
        self._retry_at = 0.0  # after a failure, no thread tries Redis again before this
        self.redis = DownOnce(log, "Redis (journaling results)")
        self.sweeper = DownOnce(log, "Redis (reading journaled results)")

    def _key(self, worker: str) -> bytes:
        key = self._keys.get(worker)
        if key is None:
            key = self._keys[worker] = journal_key(self.namespace, process_of(worker)).encode()
        return key

    def _connection(self) -> Any:  # redis-py's connections are untyped
        if self._conn is None:
            conn: Any = self._pool.make_connection()
            conn.connect()
            conn.send_command("CLIENT", "REPLY", "OFF")
            sock = conn._sock
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                # Nagle back on: nothing ever waits for a reply here, so small sends
                # may queue in the kernel while one is unacknowledged, and Redis
                # wakes once for many of them. Queued bytes are still sent when
                # the process dies: the kernel closes the socket in order.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            if isinstance(sock, socket.socket) and not isinstance(sock, ssl.SSLSocket):
                # Only ever written (replies are off): non-blocking, a send is one
                # system call where a socket with a timeout polls before each, and
                # it keeps the interpreter lock (outbox.delivery.locked_send).
                sock.setblocking(False)
                self._sock = sock
            self._conn = conn
        return self._conn

    def flush(self, ticket: Ticket | None = None) -> None:
        """Hand everything buffered to the kernel for Redis, in the order it came
        (for a ticket: unless the send this thread waited for carried it)."""
        with self._send_lock:
            if ticket is not None and ticket.sent is not None:
                return
            with self._buffer_lock:
                buffered, self._buffer = self._buffer, []
                carried, self._ticket = self._ticket, Ticket()
            if buffered:
                data = commands(buffered, self._key, self._armed)
                carried.sent = self._send(data) if data else True

    def _send(self, data: bytes) -> bool:
        if time.monotonic() < self._retry_at:
            return False  # Redis failed a moment ago: no connect timeout per message
        try:
            conn = self._connection()
            if self._sock is not None:
                locked_send.send_all(self._sock, data, timeout=_SEND_SECONDS)
            else:
                conn.send_packed_command([data], check_health=False)
        except (redis.RedisError, OSError) as exc:
            self._drop()
            self._retry_at = time.monotonic() + _RETRY_SECONDS
            self.redis.failed(exc)
            return False
        if self.redis.is_down:  # read without its lock: ok() takes it only after an outage
            self.redis.ok()
        return True

    def _drop(self) -> None:
        conn, self._conn, self._sock = self._conn, None, None
        self._armed = set()  # Redis may have restarted meanwhile, its keys gone
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.disconnect()

    def record(self, worker: str, record: store.AttemptRecord) -> Ticket:
        """Buffer one result for Redis; :meth:`ensure` it before the thread sends again."""
        entry = journal_entry(worker, record)
        return _LOST if entry is None else self.add(_Held(worker, record, entry))

    def add(self, item: Journaled) -> Ticket:
        """Buffer one result (an attempt) for Redis, to be encoded when it is sent;
        :meth:`ensure` it before the thread sends again."""
        if time.monotonic() < self._retry_at:
            return _LOST
        with self._buffer_lock:
            self._buffer.append(item)
            return self._ticket

    def ensure(self, ticket: Ticket, item: Journaled | None = None) -> bool:
        """Whether the result (``item``, added with ``ticket``) is in the kernel on
        its way to Redis, sending it if no other thread has; False: it is not, and
        the caller must wait for Postgres."""
        if ticket.sent is None:
            self.flush(ticket)
        return bool(ticket.sent) and (item is None or item.entry is not None)

    def clear(self, worker: str, ids: Sequence[int], *, others_sending: bool = False) -> None:
        """Drop these results of a thread's once they are in Postgres. While
        ``others_sending``, the next thread's send carries the drop; else it is
        sent at once, so an idle worker leaves no journal. Lost with Redis, it is
        harmless: an entry outliving its result is stale, and never applied."""
        if ids:
            dropped = Drop(worker, b" ".join(b"%d" % i for i in ids))
            with self._buffer_lock:
                self._buffer.append(dropped)
            if not others_sending:
                self.flush()

    def close(self) -> None:
        self.flush()
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
        """(process, raw results) of every journal in this namespace."""
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
        processes: set[str] = set()
        try:
            for process, values in self.journaled():
                processes.add(process)
                for raw in values:
                    decoded = decode(raw)
                    if decoded is None:
                        log.warning("a journaled result of %s is unreadable; left out", process)
                        continue
                    results.append(decoded)
        except redis.RedisError as exc:
            self.sweeper.failed(exc)
            return Recovered(0, [])
        self.sweeper.ok()
        if not processes:
            return Recovered(0, [])
        recorded = store.recover_journaled(conn, results, stuck_seconds=stuck_seconds)
        done = store.finished_journals(
            conn, results, sorted(processes), stuck_seconds=stuck_seconds
        )
        return Recovered(recorded, done)

    def drop(self, processes: Sequence[str]) -> None:
        """Delete these processes' journals (after the sweep that read them committed)."""
        if processes:
            with contextlib.suppress(redis.RedisError):  # tried again at the next sweep
                self._client().delete(*(journal_key(self.namespace, p) for p in processes))


@dataclass(frozen=True, slots=True)
class Recovered:
    recorded: int  # rows whose journaled result was recorded instead of swept
    finished: list[str]  # silent processes whose journals have nothing left to apply
